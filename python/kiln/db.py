"""The tuning log: open it, then ask for the best, the top k or the history of measured configs.

    log = kiln.db.open("tuning.db")
    rec = log.best(task)                    # the fastest valid record, or None
    f = task.build(task.config(rec.knobs))
"""
from ._kiln.db import Job, Record, TuningLog, open  # noqa: F401
