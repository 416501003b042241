"""Models: import an ONNX model into Kiln's graph IR, run it with the reference executor, and
compile it (with the configs of a tuning log) into an artifact that kiln.runtime loads.

    g = kiln.graph.load_onnx("model.onnx")
    y, = kiln.graph.Executor(g).run(x)            # every node compiled by Kiln, run in order
    kiln.graph.compile(g.optimize(log="tuning.db"), "model.kiln", log="tuning.db")
    y, = kiln.runtime.load("model.kiln")(x)
"""
from ._kiln.graph import Executor, Graph, compile, load_onnx  # noqa: F401
