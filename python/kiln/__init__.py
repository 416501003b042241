"""Kiln, a deep-learning compiler, from Python.

Describe a computation with kiln.te, schedule it, lower it and build it:

    from kiln import te
    import kiln
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=32)
    print(kiln.lower(s, [A, B, C]))
    f = kiln.build(s, [A, B, C], "llvm")
"""
from . import _runtime, _kiln
from ._kiln import (
    UserError,
    InternalError,
    ScheduleError,
    ExprError,
    KernelRuntimeError,
    TensorError,
    KernelError,
    ModuleError,
    OpError,
    ConfigError,
    TuningDbError,
    ArtifactError,
    GraphInputError,
    GraphError,
    ModelImportError,
    ExecutionError,
    TuneError,
    MeasureError,
    Module,
    LoweredFunc,
    Stmt,
    lower,
    build,
)
from . import te, ops, db, graph, runtime, tune

__all__ = [
    "te", "ops", "db", "graph", "runtime", "tune", "lower", "build", "Module", "LoweredFunc", "Stmt",
    "UserError", "InternalError", "ScheduleError", "ExprError", "KernelRuntimeError", "TensorError",
    "KernelError", "ModuleError", "OpError", "ConfigError", "TuningDbError",
    "ArtifactError", "GraphInputError", "GraphError", "ModelImportError", "ExecutionError", "TuneError", "MeasureError",
]
