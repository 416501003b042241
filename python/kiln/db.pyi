"""The tuning log (type hints)."""
from typing import Any, Dict, List, Optional, Union

from .ops import Task

class Record:
    id: int
    workload_key: str
    template: str
    args: Any
    target: str
    device: str
    job_id: Optional[int]
    config_index: int
    space: str
    knobs: Dict[str, Any]
    error: str
    error_message: str
    valid: bool
    costs: List[float]
    mean: float
    wall_s: float
    runner: str
    kiln_version: str
    timestamp: float

class Job:
    id: int
    name: str
    state: str
    trials_total: int
    trials_done: int
    message: str

class TuningLog:
    path: str
    def best(self, workload: Union[str, Task], target: Optional[str] = None,
             device: Optional[str] = None) -> Optional[Record]: ...
    def top_k(self, workload: Union[str, Task], k: int, target: Optional[str] = None,
              device: Optional[str] = None) -> List[Record]: ...
    def history(self, template: str, device: str, valid_only: bool = False, limit: int = 0) -> List[Record]: ...
    def records(self) -> List[Record]: ...
    def jobs(self) -> List[Job]: ...
    def job(self, id: int) -> Optional[Job]: ...

def open(path: str, create: bool = False, read_only: bool = False) -> TuningLog: ...
