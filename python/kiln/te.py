"""Tensor expressions and schedules, with TVM's names: placeholder, compute, reduce_axis, sum,
create_schedule and the schedule primitives on s[T]."""
from ._kiln.te import *  # noqa: F401,F403
from ._kiln.te import (  # noqa: F401
    Expr, Var, IterVar, Tensor, Operation, Stage, Schedule, TensorIntrin,
    var, const, placeholder, compute, reduce_axis, thread_axis, sum, prod, max, min,
    if_then_else, select, all, any, exp, log, sqrt, rsqrt, tanh, sigmoid, erf, fabs, abs, floor,
    ceil, round, sin, cos, power, cast, floordiv, floormod, truncdiv, truncmod, create_schedule,
    Buffer, decl_tensor_intrin, for_range, seq, evaluate,
)

size_var = var
