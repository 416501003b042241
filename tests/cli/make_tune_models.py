#!/usr/bin/python3
"""Small ONNX models for the `kiln tune --model` tests.

Usage: make_tune_models.py OUT_DIR

Writes OUT_DIR/block.onnx: input [1,8,12,12] -> Conv(3x3, pad 1, bias) -> Relu -> Conv (the same
shape) -> Add(input) -> Relu -> output, a residual block whose two convs are one tuning task;
OUT_DIR/input.npy, an input for it; OUT_DIR/relu.onnx, a model with no tunable operator; and
OUT_DIR/tasks.onnx: input [1,8,height,width] (symbolic height and width) -> the residual block ->
Conv(8->16, 3x3, pad 1) -> Relu -> Conv(16->16, 1x1) -> output, three tuning tasks, the first of
weight 2.

Exit status: 0 when written, 2 for a bad command line, 77 when onnx or numpy cannot be imported.
"""

import os
import sys


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    try:
        import numpy as np
        import onnx
        from onnx import TensorProto, helper, numpy_helper
    except ImportError as e:
        print("cannot write the models: %s" % e, file=sys.stderr)
        return 77
    out = argv[1]
    rng = np.random.default_rng(7)

    def weight(name, shape):
        return numpy_helper.from_array(rng.uniform(-0.5, 0.5, shape).astype(np.float32), name)

    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 8, 12, 12])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 8, 12, 12])
    nodes = [
        helper.make_node("Conv", ["input", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["a1"], name="relu1"),
        helper.make_node("Conv", ["a1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c2", "input"], ["s"], name="residual"),
        helper.make_node("Relu", ["s"], ["output"], name="relu2"),
    ]
    inits = [weight("w1", (8, 8, 3, 3)), weight("b1", (8,)), weight("w2", (8, 8, 3, 3)), weight("b2", (8,))]
    block = helper.make_model(helper.make_graph(nodes, "block", [x], [y], inits),
                              opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(block)
    onnx.save(block, os.path.join(out, "block.onnx"))
    np.save(os.path.join(out, "input.npy"), rng.uniform(-1, 1, (1, 8, 12, 12)).astype(np.float32))

    relu = helper.make_model(
        helper.make_graph([helper.make_node("Relu", ["input"], ["output"], name="relu")], "relu", [x], [y]),
        opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(relu)
    onnx.save(relu, os.path.join(out, "relu.onnx"))

    free = helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 8, "height", "width"])
    wide = helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 16, "height", "width"])
    nodes = [
        helper.make_node("Conv", ["input", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["a1"], name="relu1"),
        helper.make_node("Conv", ["a1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c2", "input"], ["s"], name="residual"),
        helper.make_node("Relu", ["s"], ["a2"], name="relu2"),
        helper.make_node("Conv", ["a2", "w3", "b3"], ["c3"], name="conv3", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c3"], ["a3"], name="relu3"),
        helper.make_node("Conv", ["a3", "w4"], ["output"], name="conv4"),
    ]
    inits = [weight("w1", (8, 8, 3, 3)), weight("b1", (8,)), weight("w2", (8, 8, 3, 3)), weight("b2", (8,)),
             weight("w3", (16, 8, 3, 3)), weight("b3", (16,)), weight("w4", (16, 16, 1, 1))]
    tasks = helper.make_model(helper.make_graph(nodes, "tasks", [free], [wide], inits),
                              opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(tasks)
    onnx.save(tasks, os.path.join(out, "tasks.onnx"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
