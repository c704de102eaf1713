import numpy as np
import pytest


@pytest.fixture
def rng(request):
    # Fresh, reproducible randomness per test: the seed is derived from the test's name.
    return np.random.default_rng(abs(hash(request.node.nodeid)) % 2**32)
