"""te.decl_tensor_intrin and Stage.tensorize: a matmul's inner block replaced by an intrinsic whose
body is a loop nest built in Python, checked against numpy."""
import gc

import numpy as np
import pytest

import kiln
from kiln import te

from conftest import loops


def gemv_intrin(m, l, name="gemv"):
    """c[i] = sum_k a[k] * b[i, k] on an m x l block; its body names its loops gemv_i and gemv_k."""
    a = te.placeholder((l,), name="a")
    b = te.placeholder((m, l), name="b")
    k = te.reduce_axis((0, l), name="k")
    c = te.compute((m,), lambda i: te.sum(a[k] * b[i, k], axis=k), name="c")

    def fcompute(ins, outs):
        aa, bb = ins
        (cc,) = outs

        def reset():
            return te.for_range(m, lambda i: cc.vstore([i], 0.0), name="gemv_i")

        def update():
            return te.for_range(
                m, lambda i: te.for_range(
                    l, lambda k: cc.vstore([i], cc.vload([i]) + aa.vload([k]) * bb.vload([i, k])), name="gemv_k"),
                name="gemv_i")

        return te.seq(reset(), update()), reset(), update()

    return te.decl_tensor_intrin(c.op, fcompute, name=name)


def matmul(n, m, l):
    A = te.placeholder((n, l), name="A")
    B = te.placeholder((m, l), name="B")
    k = te.reduce_axis((0, l), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[j, k], axis=k), name="C")
    return A, B, C


def run(s, args, shapes, rng):
    f = kiln.build(s, args)
    a = rng.standard_normal(shapes[0]).astype("float32")
    b = rng.standard_normal(shapes[1]).astype("float32")
    c = np.full(shapes[2], np.nan, dtype="float32")
    f(a, b, c)
    return a, b, c


def test_inner_block_of_a_matmul_is_the_intrinsic(rng):
    n, m, l = 6, 32, 24
    A, B, C = matmul(n, m, l)
    s = te.create_schedule(C.op)
    jo, ji = s[C].split(C.op.axis[1], factor=8)
    intrin = gemv_intrin(8, l)
    assert intrin.name == "gemv"
    s[C].tensorize(ji, intrin)
    text = str(kiln.lower(s, [A, B, C]))
    # the stage's loops down to the tensorized one, then the intrinsic's own
    assert loops(text) == ["i", "j.outer", "gemv_i", "gemv_i", "gemv_k"]
    assert "j.inner" not in text
    a, b, c = run(s, [A, B, C], [(n, l), (m, l), (n, m)], rng)
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-5, atol=1e-5)


def test_reduction_split_outside_uses_reset_and_update(rng):
    n, m, l = 4, 16, 32
    A, B, C = matmul(n, m, l)
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    jo, ji = s[C].split(j, factor=8)
    ko, ki = s[C].split(k, factor=8)
    s[C].reorder(i, jo, ko, ji, ki)
    s[C].tensorize(ji, gemv_intrin(8, 8))
    text = str(kiln.lower(s, [A, B, C]))
    assert loops(text)[:3] == ["i", "j.outer", "k.outer"]
    assert "ki" not in loops(text) and "j.inner" not in text
    a, b, c = run(s, [A, B, C], [(n, l), (m, l), (n, m)], rng)
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-5, atol=1e-5)


def test_schedule_outlives_the_intrinsic_and_its_python_function(rng):
    def make():
        A, B, C = matmul(3, 16, 8)
        s = te.create_schedule(C.op)
        jo, ji = s[C].split(C.op.axis[1], factor=8)
        s[C].tensorize(ji, gemv_intrin(8, 8))
        return s

    s = make()
    gc.collect()
    (op,) = s.outputs
    C = op.output(0)
    A, B = C.op.input_tensors
    a, b, c = run(s, [A, B, C], [(3, 8), (16, 8), (3, 16)], rng)
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-5, atol=1e-5)


def test_bad_intrinsics_raise_their_errors():
    A, B, C = matmul(4, 16, 32)
    a = te.placeholder((8,), name="a")
    b = te.placeholder((8, 8), name="b")
    k = te.reduce_axis((0, 8), name="k")
    c = te.compute((8,), lambda i: te.sum(a[k] * b[i, k], axis=k), name="c")
    body_only = te.decl_tensor_intrin(
        c.op, lambda ins, outs: te.for_range(8, lambda i: outs[0].vstore([i], 0.0)), name="body_only")
    # the reduction split outside needs (body, reset, update)
    s = te.create_schedule(C.op)
    jo, ji = s[C].split(C.op.axis[1], factor=8)
    ko, ki = s[C].split(C.op.reduce_axis[0], factor=8)
    s[C].reorder(C.op.axis[0], jo, ko, ji, ki)
    s[C].tensorize(ji, body_only)
    with pytest.raises(kiln.ScheduleError, match="body_only: reduction loops outside it need"):
        kiln.lower(s, [A, B, C])
    # a body that is not a statement
    A, B, C = matmul(4, 16, 8)
    s = te.create_schedule(C.op)
    jo, ji = s[C].split(C.op.axis[1], factor=8)
    s[C].tensorize(ji, te.decl_tensor_intrin(c.op, lambda ins, outs: 42, name="bad"))
    with pytest.raises(TypeError, match="must be a statement"):
        kiln.lower(s, [A, B, C])
    # a Python error inside fcompute comes out as itself
    def fails(ins, outs):
        raise RuntimeError("no body today")
    s = te.create_schedule(C.op)
    jo, ji = s[C].split(C.op.axis[1], factor=8)
    s[C].tensorize(ji, te.decl_tensor_intrin(c.op, fails))
    with pytest.raises(RuntimeError, match="no body today"):
        kiln.lower(s, [A, B, C])
    # the pattern must be a compute on placeholders
    with pytest.raises(kiln.ExprError, match="must be a compute"):
        te.decl_tensor_intrin(a.op, lambda ins, outs: None)


def test_buffer_indexing_is_checked():
    seen = {}
    a = te.placeholder((4,), name="a")
    c = te.compute((4,), lambda i: a[i] * 2.0, name="c")

    def fcompute(ins, outs):
        with pytest.raises(kiln.ExprError, match="buffer a has 1 dimensions, indexed with 2"):
            ins[0].vload([0, 0])
        with pytest.raises(kiln.ExprError, match="cannot store a int32"):
            outs[0].vstore([0], te.const(1, "int32"))
        seen["dtype"], seen["shape"] = ins[0].dtype, [x.value for x in ins[0].shape]
        return te.for_range(4, lambda i: outs[0].vstore([i], ins[0].vload([i]) * 2.0), name="dbl")

    A = te.placeholder((16,), name="A")
    C = te.compute((16,), lambda i: A[i] * 2.0, name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=4)
    s[C].tensorize(xi, te.decl_tensor_intrin(c.op, fcompute, name="dbl"))
    f = kiln.build(s, [A, C])
    assert seen == {"dtype": "float32", "shape": [4]}
    x = np.arange(16, dtype="float32")
    y = np.zeros(16, dtype="float32")
    f(x, y)
    np.testing.assert_array_equal(y, x * 2)
