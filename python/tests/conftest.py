"""pytest configuration of the moe_mlir tests."""

import zlib

import numpy as np
import pytest


@pytest.fixture
def rng(request):
    """A generator seeded by the test's id: reproducible, order-independent."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))
