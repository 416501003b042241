"""Reference counting: objects Python hands out keep what they point into alive."""
import gc

import numpy as np

import kiln
from kiln import te


def make_schedule():
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] * 3.0, name="B")
    s = te.create_schedule(B.op)
    return s


def test_schedule_outlives_its_python_tensors():
    s = make_schedule()
    gc.collect()
    (op,) = s.outputs
    B = op.output(0)
    (A,) = B.op.input_tensors
    xo, xi = s[B].split(B.op.axis[0], factor=8)
    f = kiln.build(s, [A, B])
    a = np.arange(64, dtype="float32")
    b = np.zeros(64, dtype="float32")
    f(a, b)
    np.testing.assert_array_equal(b, a * 3)


def test_stage_outlives_its_schedule_handle():
    s = make_schedule()
    (op,) = s.outputs
    stage = s[op]
    del s
    gc.collect()
    xo, xi = stage.split(stage.op.axis[0], factor=16)
    assert [iv.var.name for iv in stage.leaf_iter_vars] == ["i.outer", "i.inner"]


def test_function_outlives_its_module():
    s = make_schedule()
    (op,) = s.outputs
    B = op.output(0)
    fn = kiln.build(s, [B.op.input_tensors[0], B], name="triple").get_function("triple")
    gc.collect()
    a = np.ones(64, dtype="float32")
    b = np.zeros(64, dtype="float32")
    fn(a, b)
    assert (b == 3).all()
