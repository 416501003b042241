"""Builds and runs a small kernel many times and asserts that the resident memory stops growing:
each build's compiled code, schedule and tensors are freed with their Python objects."""
import numpy as np

import kiln
from kiln import te


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


def build_and_run(a, b):
    # a fixed size: the split has no tail, so each build is a small function for LLVM
    A = te.placeholder((256,), name="A")
    B = te.compute((256,), lambda i: A[i] * 2.0 + 1.0, name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=16)
    f = kiln.build(s, [A, B])
    f(a, b)


def test_no_growth_over_10000_builds():
    a = np.ones(256, dtype="float32")
    b = np.zeros(256, dtype="float32")
    for _ in range(100):  # warm up allocator pools and LLVM's one-time state
        build_and_run(a, b)
    start = rss_kib()
    for _ in range(10000):
        build_and_run(a, b)
    growth = rss_kib() - start
    print(f"rss growth over 10000 builds: {growth} KiB")
    assert (b == 3).all()
    # a leaked module (code pages, LLVM context) would cost far more than 1 KiB per build
    assert growth < 10 * 1024, f"resident memory grew by {growth} KiB over 10000 builds"
