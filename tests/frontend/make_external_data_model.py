"""Writes a small model whose initializers live in an external data file, with an input and the
expected output (float64 reference rounded to float32), for tests/frontend/onnx_external_data_test.

Usage: make_external_data_model.py OUT_DIR. Exits 77 when numpy or onnx cannot be imported."""
import sys

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError:
    sys.exit(77)

out = sys.argv[1]
rng = np.random.default_rng(0)
w = rng.standard_normal((64, 32)).astype(np.float32)
b = rng.standard_normal((32,)).astype(np.float32)
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 32])
graph = helper.make_graph(
    [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["y"])],
    "external",
    [x],
    [y],
    [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
onnx.save_model(model, out + "/model.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
                location="weights.bin", size_threshold=0)
xv = rng.standard_normal((4, 64)).astype(np.float32)
np.save(out + "/x.npy", xv)
np.save(out + "/want.npy", (xv.astype(np.float64) @ w.astype(np.float64) + b).astype(np.float32))
