"""Stands in for torch in the fresh interpreters the tests start (``tests/child_python.py``): importing
it fails as if torch were not installed."""

raise ImportError("torch is hidden from this child process of the tests (tests/child_python.py)")
