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

Only kiln.runtime and the error classes it raises are loaded by `import kiln`; the compiler
(kiln._kiln, with LLVM) is loaded on first use of any other name, so that a process that only
runs compiled models with kiln.runtime never loads it.
"""
import importlib

from . import _runtime, runtime
from ._runtime import (
    UserError,
    InternalError,
    TensorError,
    KernelError,
    ModuleError,
    ArtifactError,
    GraphInputError,
)

# The names that live in the compiler extension, and the submodules that import it.
_COMPILER_NAMES = frozenset([
    "ScheduleError", "ExprError", "KernelRuntimeError", "OpError", "ConfigError", "TuningDbError", "GraphError",
    "ModelImportError", "ExecutionError", "TuneError", "MeasureError", "Module", "LoweredFunc", "Stmt", "lower",
    "build",
])
_COMPILER_SUBMODULES = frozenset(["te", "ops", "db", "graph", "tune", "_kiln"])


def __getattr__(name):
    if name in _COMPILER_SUBMODULES:
        value = importlib.import_module("." + name, __name__)
    elif name in _COMPILER_NAMES:
        value = getattr(importlib.import_module("._kiln", __name__), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | _COMPILER_NAMES | _COMPILER_SUBMODULES)


__all__ = [
    "te", "ops", "db", "graph", "runtime", "tune", "lower", "build", "Module", "LoweredFunc", "Stmt",
    "UserError", "InternalError", "ScheduleError", "ExprError", "KernelRuntimeError", "TensorError",
    "KernelError", "ModuleError", "OpError", "ConfigError", "TuningDbError",
    "ArtifactError", "GraphInputError", "GraphError", "ModelImportError", "ExecutionError", "TuneError", "MeasureError",
]
