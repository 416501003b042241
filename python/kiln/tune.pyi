"""Tuning jobs (type hints)."""
import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from .ops import Task

class TaskStatus:
    name: str
    workload_key: str
    flop: float
    trials: int
    valid: int
    best_s: Optional[float]
    default_s: Optional[float]
    done: str
    errors: Dict[str, int]
    best_gflops: float

class JobStatus:
    job_id: int
    state: str
    trials_done: int
    trials_total: int
    elapsed_s: float
    message: str
    tasks: List[TaskStatus]
    objective_s: float

TaskLike = Union[Task, Tuple[str, Dict[str, Any]]]

def run(tasks: Union[TaskLike, Sequence[TaskLike]], log: Union[str, "os.PathLike[str]"], trials: int = 16,
        target: Optional[str] = None, device: str = "local-cpu", strategy: str = "xgb", batch_size: int = 8,
        seed: int = 0, transfer: bool = True, threads: int = 0, name: str = "python",
        progress: Optional[Callable[[JobStatus], None]] = None) -> JobStatus: ...

def submit(tasks: Union[TaskLike, Sequence[TaskLike]], daemon: str, token_file: Union[str, "os.PathLike[str]"] = "",
           trials: int = 16, target: str = "", device: str = "", strategy: str = "xgb", batch_size: int = 8,
           seed: int = 0, name: str = "python", wait: bool = True,
           progress: Optional[Callable[[JobStatus], None]] = None) -> JobStatus: ...
