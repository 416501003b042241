"""Shared helpers for the kiln package's tests."""
import numpy as np
import pytest


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def loops(ir_text):
    """The loop headers of printed IR, outermost first, as (variable, extent text) pairs."""
    out = []
    for line in str(ir_text).splitlines():
        line = line.strip()
        if line.startswith("for ("):
            inner = line[len("for ("):line.rindex(")")]
            parts = [p.strip() for p in inner.split(",")]
            out.append(parts[0])
    return out
