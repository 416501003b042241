"""Models (type hints)."""
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from .db import TuningLog

IoSpec = Tuple[str, List[int], str]

class Graph:
    inputs: List[IoSpec]
    outputs: List[IoSpec]
    ops: List[str]
    def __len__(self) -> int: ...
    def optimize(self, target: str = "llvm -mcpu=native") -> "Graph": ...

def load_onnx(path: str, input_shapes: Dict[str, Sequence[int]] = ..., target: str = "llvm -mcpu=native") -> Graph: ...

class Executor:
    tuned_kernels: int
    template_kernels: int
    def __init__(self, graph: Graph, target: str = "llvm -mcpu=native", log: Union[None, str, TuningLog] = None,
                 device: str = "local-cpu") -> None: ...
    def run(self, *inputs: np.ndarray, **named: np.ndarray) -> List[np.ndarray]: ...

def compile(graph: Graph, path: str, target: str = "llvm -mcpu=native", log: Union[None, str, TuningLog] = None,
            device: str = "local-cpu") -> Dict[str, Any]: ...
