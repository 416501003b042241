"""The first tutorial, written the TVM way: vector add over a symbolic n, split by 32."""
import numpy as np
import pytest

import kiln
from kiln import te

from conftest import loops


def vector_add():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")
    return A, B, C


def test_split_by_32_prints_outer_and_inner_loops():
    A, B, C = vector_add()
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=32)
    text = str(kiln.lower(s, [A, B, C]))
    assert text.startswith("func main(A: float32[n], B: float32[n], C: float32[n])")
    # the main body of whole blocks of 32, then the tail
    assert loops(text)[:2] == ["i.outer", "i.inner"]
    assert "for (i.inner, 0, 32)" in text
    assert "C[((i.outer * 32) + i.inner)] = (A[((i.outer * 32) + i.inner)] + B[((i.outer * 32) + i.inner)])" in text


def test_simple_mode_prints_the_body_only():
    A, B, C = vector_add()
    s = te.create_schedule(C.op)
    text = str(kiln.lower(s, [A, B, C], simple_mode=True))
    assert not text.startswith("func")
    assert loops(text) == ["i"]


@pytest.mark.parametrize("n", [1, 31, 32, 1000, 1027])
def test_build_matches_numpy(rng, n):
    A, B, C = vector_add()
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=32)
    f = kiln.build(s, [A, B, C], "llvm")
    a = rng.standard_normal(n).astype("float32")
    b = rng.standard_normal(n).astype("float32")
    c = np.zeros(n, dtype="float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a + b, rtol=1e-6)


def test_aligned_output_is_written_in_place_and_unaligned_is_copied_back(rng):
    A, B, C = vector_add()
    s = te.create_schedule(C.op)
    f = kiln.build(s, [A, B, C])
    n = 100
    a = rng.standard_normal(n).astype("float32")
    b = rng.standard_normal(n).astype("float32")
    # a view starting 4 bytes into a buffer is never 64-byte aligned
    backing = np.zeros(n + 1, dtype="float32")
    c = backing[1:]
    f(a, b, c)
    np.testing.assert_allclose(c, a + b, rtol=1e-6)
    assert backing[0] == 0
    # a strided (non-contiguous) input is staged too
    wide = np.repeat(a, 2)[::2]
    c2 = np.zeros(n, dtype="float32")
    f(wide, b, c2)
    np.testing.assert_allclose(c2, a + b, rtol=1e-6)


def test_get_source_is_the_llvm_ir_and_the_assembly():
    A, B, C = vector_add()
    s = te.create_schedule(C.op)
    f = kiln.build(s, [A, B, C], "llvm", name="vadd")
    ir = f.get_source()
    assert "define" in ir and "kiln_fn_vadd" in ir
    assert "kiln_fn_vadd" in f.get_source("asm")
    with pytest.raises(kiln.UserError, match="unknown format"):
        f.get_source("ptx")


def test_wrong_shapes_raise_kernel_error():
    A, B, C = vector_add()
    s = te.create_schedule(C.op)
    f = kiln.build(s, [A, B, C])
    a = np.zeros(8, dtype="float32")
    with pytest.raises(kiln.KernelError, match=r"argument 3 \(C\): dimension 0 must be n") as e:
        f(a, a, np.zeros(4, dtype="float32"))
    # the message of driver::BuiltFunction, which C++ callers get as well
    assert str(e.value).endswith("; signature default_function(A: float32[n], B: float32[n], C: float32[n])"
                                 "; given (float32[8], float32[8], float32[4])")
    with pytest.raises(kiln.KernelError, match="dtype"):
        f(a, a, np.zeros(8, dtype="float64"))
    with pytest.raises(kiln.UserError):
        f(a, a)


def test_schedule_errors_are_schedule_error():
    A, B, C = vector_add()
    s = te.create_schedule(C.op)
    s[C].split(C.op.axis[0], factor=32)
    with pytest.raises(kiln.ScheduleError, match="in stage C, cannot split axis i: it was split"):
        s[C].split(C.op.axis[0], factor=4)
    assert issubclass(kiln.ScheduleError, kiln.UserError)
    assert issubclass(kiln.UserError, ValueError)


def test_bad_target_is_a_user_error():
    A, B, C = vector_add()
    s = te.create_schedule(C.op)
    with pytest.raises(kiln.UserError):
        kiln.build(s, [A, B, C], "llvm -mcpu=nosuchcpu")


def test_expressions_print_and_index_rank_is_checked():
    A, B, C = vector_add()
    i = C.op.axis[0]
    # integer constants take the float type of the tensor they meet
    assert str(A[i] * 2 + 1) == "((A(i) * 2.0f) + 1.0f)"
    assert str(i // 4 + i % 4) == "(floordiv(i, 4) + floormod(i, 4))"
    assert (A[i] + 1).dtype == "float32"
    with pytest.raises(kiln.ExprError):
        A[i, i]
