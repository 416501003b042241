"""Compiled models run without the compiler (type hints)."""
from typing import List, Tuple, Union

import numpy as np

IoSpec = Tuple[str, List[int], str]

class GraphModule:
    inputs: List[IoSpec]
    outputs: List[IoSpec]
    target: str
    arena_bytes: int
    params_bytes: int
    def set_input(self, key: Union[int, str], value: np.ndarray) -> None: ...
    def run(self) -> None: ...
    def get_output(self, index: int) -> np.ndarray: ...
    def __call__(self, *inputs: np.ndarray, **named: np.ndarray) -> List[np.ndarray]: ...

def load(path: str) -> GraphModule: ...
