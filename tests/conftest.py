import zlib

import numpy as np
import pytest


def test_seed(nodeid: str) -> int:
    """The seed of a test's ``rng``: CRC-32 of its node id, the same in every process and run
    (``hash()`` is salted per process, so a failure seeded from it could not be replayed)."""
    return zlib.crc32(nodeid.encode())


test_seed.__test__ = False  # a helper, not a test


@pytest.fixture
def rng(request):
    # Fresh, reproducible randomness per test: the seed is derived from the test's id and shown
    # in the report of a failing test ("rng seed" section).
    seed = test_seed(request.node.nodeid)
    request.node.user_properties.append(("rng seed", seed))
    return np.random.default_rng(seed)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    seeds = [value for name, value in item.user_properties if name == "rng seed"]
    if report.failed and seeds:
        report.sections.append(("rng seed", f"np.random.default_rng({seeds[0]})  # zlib.crc32({item.nodeid!r})"))
