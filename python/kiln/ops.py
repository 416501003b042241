"""The operator library: templates, tasks (a workload on a target), their config spaces and configs.

    task = kiln.ops.task("matmul.x86", {"M": 64, "N": 64, "K": 64})
    space = task.config_space
    len(space), space.get(0), space.sample()
    f = task.build(space.sample())          # callable on numpy arrays: inputs, then outputs
"""
from ._kiln.ops import (  # noqa: F401
    Argument, Config, ConfigSpace, Task, Template, task, template, templates,
)
