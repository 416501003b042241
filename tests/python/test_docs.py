"""Runs every python block of docs/python.md, in order and in one namespace, so that the tutorial
cannot drift from the package."""
import os
import pathlib
import re

import pytest


def doc_blocks():
    root = pathlib.Path(os.environ.get("KILN_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
    text = (root / "docs" / "python.md").read_text()
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def test_the_tutorial_has_blocks():
    assert len(doc_blocks()) >= 6


def test_every_block_runs(capsys):
    namespace = {}
    for i, block in enumerate(doc_blocks()):
        try:
            exec(compile(block, f"docs/python.md block {i}", "exec"), namespace)
        except Exception as e:  # name the block that failed
            pytest.fail(f"block {i} of docs/python.md failed: {type(e).__name__}: {e}\n{block}")
    out = capsys.readouterr().out
    assert "for (i.outer, 0, floordiv(n, 32))" in out
    assert "argument 3 (C): dimension 0 must be n" in out
    assert "cannot split axis i" in out
    assert "gemv_k" in out  # the tensorized matmul's loops
