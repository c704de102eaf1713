"""Every public ``T.rocm.*`` helper, as registered in TVMScript's ``T.rocm`` namespace, documents
itself: a docstring that starts with the call, names each of its parameters, says what it lowers to
and shows an example (issue 35)."""

import inspect
from types import SimpleNamespace

import pytest
from tvm_tirx.script import tirx as T

import tvm_cdna4  # noqa: F401 - registers the T.rocm namespace


def _helpers(prefix: str, namespace) -> dict:
    out = {}
    for name, value in vars(namespace).items():
        if name.startswith("_"):
            continue
        if isinstance(value, SimpleNamespace):
            out.update(_helpers(f"{prefix}{name}.", value))
        else:
            out[f"{prefix}{name}"] = value
    return out


HELPERS = _helpers("T.rocm.", T.rocm)


def test_the_namespace_holds_the_documented_helpers():
    assert {"T.rocm.tile.apply", "T.rocm.lane_id", "T.rocm.wave_id", "T.rocm.buffer_load", "T.rocm.buffer_load_lds",
            "T.rocm.global_atomic_add_f32", "T.rocm.s_waitcnt_vmcnt", "T.rocm.wave_reduce"} <= set(HELPERS)
    assert all(callable(helper) for helper in HELPERS.values())


@pytest.mark.parametrize("name", sorted(HELPERS))
def test_each_helper_documents_its_call_parameters_instruction_and_an_example(name):
    helper = HELPERS[name]
    doc = inspect.getdoc(helper)
    assert doc, f"{name} has no docstring"
    assert doc.startswith(f"``{name}("), f"{name}: the docstring should start with the call, ``{name}(...)``"
    for parameter in inspect.signature(helper).parameters:
        assert f"``{parameter}``" in doc, f"{name}: the docstring does not name the parameter ``{parameter}``"
    words = " ".join(doc.split())
    assert "Lowers to" in words, f"{name}: the docstring does not say what it lowers to"
    assert "Example" in words, f"{name}: the docstring has no example"
