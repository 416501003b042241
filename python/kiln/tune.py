"""Tuning jobs: measure configs of tasks on this machine and record them in a tuning log.

    task = kiln.ops.task("matmul.x86", {"a": {"shape": [64, 64]}, "b": {"shape": [64, 64]}})
    status = kiln.tune.run(task, "tuning.db", trials=16, progress=lambda s: print(s.trials_done))
    best = kiln.db.open("tuning.db").best(task)
"""
import os

from ._kiln.tune import JobStatus, TaskStatus, _run_embedded  # noqa: F401

_WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kiln-measure-worker")


def run(tasks, log, trials=16, target=None, device="local-cpu", strategy="xgb", batch_size=8, seed=0,
        transfer=True, threads=0, name="python", progress=None):
    """Runs a tuning job in this process and returns its JobStatus.

    tasks: a kiln.ops.Task, a (template, args) pair, or a list of them. log: the tuning log's path
    (created when missing). target: the target the tasks are built and measured for (default: the
    first Task's, else "llvm -mcpu=native"); device: the device class the records are stored under.
    progress(status) is called with a JobStatus after every batch, in this thread; an exception it
    raises, or Ctrl-C, pauses the job (its measurements stay in the log) and is raised here.
    """
    if target is None:
        first = tasks[0] if isinstance(tasks, list) and tasks else tasks
        target = getattr(first, "target", "llvm -mcpu=native")
    return _run_embedded(tasks, os.fspath(log), target, device, trials, strategy, batch_size, seed, transfer,
                         threads, name, _WORKER, progress)
