"""Tuning jobs: measure configs of tasks on this machine and record them in a tuning log.

    task = kiln.ops.task("matmul.x86", {"a": {"shape": [64, 64]}, "b": {"shape": [64, 64]}})
    status = kiln.tune.run(task, "tuning.db", trials=16, progress=lambda s: print(s.trials_done))
    best = kiln.db.open("tuning.db").best(task)
"""
import os

from ._kiln.tune import JobStatus, TaskStatus, _run_embedded, _submit  # noqa: F401

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


def submit(tasks, daemon, token_file="", trials=16, target="", device="", strategy="xgb", batch_size=8, seed=0,
           name="python", wait=True, progress=None):
    """Submits a tuning job to the tuning service (kilnd) at `daemon` (HOST:PORT) and returns its JobStatus.

    token_file: the service's token (default: $KILN_FARM_TOKEN). target, device: empty for the
    service's own. With wait, follows the job until it ends, calling progress(status) on every report
    in this thread; an exception it raises, or Ctrl-C, stops following (the job goes on in the
    service) and is raised here. The service records the job in its tuning log.
    """
    return _submit(tasks, daemon, os.fspath(token_file), target, device, trials, strategy, batch_size, seed, name,
                   wait, progress)
