"""The schedule tutorials, written the TVM way: each prints the loop structure the primitive makes
and computes what numpy computes."""
import numpy as np
import pytest

import kiln
from kiln import te

from conftest import loops


def matmul(n=64, m=48, k=32, dtype="float32"):
    A = te.placeholder((n, k), dtype=dtype, name="A")
    B = te.placeholder((k, m), dtype=dtype, name="B")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return A, B, C


def run_matmul(s, A, B, C, rng):
    f = kiln.build(s, [A, B, C])
    n, k = [d.value for d in A.shape]
    m = B.shape[1].value
    a = rng.standard_normal((n, k)).astype("float32")
    b = rng.standard_normal((k, m)).astype("float32")
    c = np.zeros((n, m), dtype="float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_default_matmul(rng):
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    assert loops(kiln.lower(s, [A, B, C])) == ["i", "j", "k"]
    run_matmul(s, A, B, C, rng)


def test_tile_then_reorder(rng):
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], x_factor=16, y_factor=8)
    assert loops(kiln.lower(s, [A, B, C])) == ["i.outer", "j.outer", "i.inner", "j.inner", "k"]
    (k,) = s[C].op.reduce_axis
    ko, ki = s[C].split(k, factor=4)
    s[C].reorder(xo, yo, ko, xi, ki, yi)
    # the reduction's initialisation nest, then the update in the new order
    assert loops(kiln.lower(s, [A, B, C])) == [
        "i.outer", "j.outer", "i.inner", "j.inner", "k.outer", "i.inner", "k.inner", "j.inner"]
    run_matmul(s, A, B, C, rng)


def test_fuse(rng):
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    fused = s[C].fuse(C.op.axis[0], C.op.axis[1])
    assert loops(kiln.lower(s, [A, B, C])) == ["i.j.fused", "k"]
    xo, xi = s[C].split(fused, nparts=8)
    assert loops(kiln.lower(s, [A, B, C]))[:2] == ["i.j.fused.outer", "i.j.fused.inner"]
    run_matmul(s, A, B, C, rng)


def two_stage(n=1024):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((n,), lambda i: B[i] + 1.0, name="C")
    return A, B, C


def test_compute_at(rng):
    A, B, C = two_stage()
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=32)
    s[B].compute_at(s[C], xo)
    text = str(kiln.lower(s, [A, C]))
    # B's loop sits inside C's outer loop, before C's inner loop
    assert loops(text) == ["i.outer", "i", "i.inner"]
    f = kiln.build(s, [A, C])
    a = rng.standard_normal(1024).astype("float32")
    c = np.zeros(1024, dtype="float32")
    f(a, c)
    np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)


def test_compute_inline_and_root(rng):
    A, B, C = two_stage()
    s = te.create_schedule(C.op)
    s[B].compute_inline()
    text = str(kiln.lower(s, [A, C]))
    assert loops(text) == ["i"]
    assert "B[" not in text
    s[B].compute_root()
    assert loops(kiln.lower(s, [A, C])) == ["i", "i"]
    f = kiln.build(s, [A, C])
    a = rng.standard_normal(1024).astype("float32")
    c = np.zeros(1024, dtype="float32")
    f(a, c)
    np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)


def test_cache_read_and_cache_write_on_a_matmul(rng):
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    AA = s.cache_read(A, "local", [C])
    CC = s.cache_write(C, "local")
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], 16, 16)
    s[CC].compute_at(s[C], yo)
    s[AA].compute_at(s[CC], s[CC].op.reduce_axis[0])
    text = str(kiln.lower(s, [A, B, C]))
    assert "A.local" in text and "C.local" in text
    assert "allocate" in text
    run_matmul(s, A, B, C, rng)


def test_rfactor(rng):
    n = 1024
    A = te.placeholder((n,), name="A")
    k = te.reduce_axis((0, n), name="k")
    S = te.compute((1,), lambda i: te.sum(A[k], axis=k), name="S")
    s = te.create_schedule(S.op)
    ko, ki = s[S].split(S.op.reduce_axis[0], factor=16)
    SF = s.rfactor(S, ki)
    text = str(kiln.lower(s, [A, S]))
    assert "S.rf" in text
    # the factored stage's loop over the 16 partial sums comes first
    assert loops(text)[0].startswith("k.inner")
    f = kiln.build(s, [A, S])
    a = rng.standard_normal(n).astype("float32")
    out = np.zeros(1, dtype="float32")
    f(a, out)
    np.testing.assert_allclose(out[0], a.sum(), rtol=1e-4)


def test_vectorize_unroll_parallel(rng):
    A, B, C = matmul(64, 64, 32)
    s = te.create_schedule(C.op)
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], 8, 8)
    (k,) = s[C].op.reduce_axis
    s[C].reorder(xo, yo, k, xi, yi)
    s[C].parallel(xo)
    s[C].unroll(xi)
    s[C].vectorize(yi)
    text = str(kiln.lower(s, [A, B, C]))
    assert "for (i.outer, 0, 8) parallel {" in text
    assert "i.inner" not in text  # unrolled
    assert "ramp(" in text and "x8(" in text  # vectorized by 8
    run_matmul(s, A, B, C, rng)


def test_bind_to_threads_lowers_to_thread_indices():
    n = 1024
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=64)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    text = str(kiln.lower(s, [A, B]))
    assert "for (i.outer, 0, 16) blockIdx.x {" in text
    assert "for (i.inner, 0, 64) threadIdx.x {" in text


def test_pragma_storage_align_double_buffer_are_accepted(rng):
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    AA = s.cache_read(A, "global", [C])
    s[AA].storage_align(s[AA].op.axis[0], 16, 8)
    s[C].pragma(C.op.axis[0], "auto_unroll_max_step", 16)
    run_matmul(s, A, B, C, rng)
    with pytest.raises(kiln.ScheduleError):
        s[C].double_buffer()  # only a stage attached inside a loop may be double-buffered


def test_expression_operators_and_intrinsics(rng):
    n = 37
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: te.if_then_else(A[i] > 0, te.exp(A[i]), te.max(A[i], -0.5)) + te.sqrt(te.abs(A[i])),
                   name="B")
    I = te.compute((n,), lambda i: (i // 4) * 10 + i % 4 - te.min(i, 3), name="I")
    s = te.create_schedule([B.op, I.op])
    f = kiln.build(s, [A, B, I])
    a = rng.standard_normal(n).astype("float32")
    b = np.zeros(n, dtype="float32")
    idx = np.zeros(n, dtype="int32")
    f(a, b, idx)
    ref = np.where(a > 0, np.exp(a), np.maximum(a, -0.5)) + np.sqrt(np.abs(a))
    np.testing.assert_allclose(b, ref, rtol=1e-5)
    i = np.arange(n)
    np.testing.assert_array_equal(idx, (i // 4) * 10 + i % 4 - np.minimum(i, 3))


def test_max_reduction(rng):
    A = te.placeholder((16, 20), name="A")
    k = te.reduce_axis((0, 20), name="k")
    M = te.compute((16,), lambda i: te.max(A[i, k], axis=k), name="M")
    s = te.create_schedule(M.op)
    f = kiln.build(s, [A, M])
    a = rng.standard_normal((16, 20)).astype("float32")
    m = np.zeros(16, dtype="float32")
    f(a, m)
    np.testing.assert_allclose(m, a.max(axis=1))


def test_an_inlined_stage_among_the_arguments_is_computed_into_its_buffer(rng):
    # the seed tutorials pass [A, B, C] after inlining B
    A, B, C = two_stage()
    s = te.create_schedule(C.op)
    s[B].compute_inline()
    text = str(kiln.lower(s, [A, B, C]))
    assert text.startswith("func main(A: float32[1024], B: float32[1024], C: float32[1024])")
    assert "B[i] = (A[i] * 2.0f)" in text
    assert "C[i] = ((A[i] * 2.0f) + 1.0f)" in text  # C still reads B inline
    f = kiln.build(s, [A, B, C])
    a = rng.standard_normal(1024).astype("float32")
    b = np.zeros(1024, dtype="float32")
    c = np.zeros(1024, dtype="float32")
    f(a, b, c)
    np.testing.assert_allclose(b, a * 2, rtol=1e-6)
    np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)


def test_an_inlined_argument_read_by_a_stage_attached_elsewhere_is_a_schedule_error():
    n = 64
    A = te.placeholder((n,), name="A")
    D = te.compute((n,), lambda i: A[i] + 1.0, name="D")
    B = te.compute((n,), lambda i: D[i] * 2.0, name="B")
    C = te.compute((n,), lambda i: B[i] - 1.0, name="C")
    s = te.create_schedule(C.op)
    s[B].compute_inline()
    xo, xi = s[C].split(C.op.axis[0], factor=8)
    s[D].compute_at(s[C], xo)
    # computing B whole at the root needs all of D, which exists only inside C's loop
    with pytest.raises(kiln.ScheduleError, match="stage D is computed at axis i.outer of stage C, but its reader B"):
        kiln.lower(s, [A, B, C])
    kiln.lower(s, [A, C])  # without B among the arguments the schedule is fine
