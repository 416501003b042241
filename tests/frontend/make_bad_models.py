"""Writes the malformed and unsupported ONNX models of onnx_import_test into a folder.

Usage: make_bad_models.py OUT_DIR

Every model is small; the test checks that each one is refused with a user error whose message
names the file, the node or the value. Exits 77 when the onnx package cannot be imported.
"""
import os
import random
import sys

try:
    import onnx
    from onnx import TensorProto, helper
except ImportError:
    sys.exit(77)


def model(nodes, inputs, outputs, initializers=(), opset=13, name="bad"):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=list(initializers))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def tensor(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def save(out_dir, file_name, m):
    with open(os.path.join(out_dir, file_name), "wb") as f:
        f.write(m.SerializeToString())


def relu_model(opset=13, shape=(2, 3)):
    return model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                 [tensor("x", TensorProto.FLOAT, list(shape))],
                 [tensor("y", TensorProto.FLOAT, list(shape))], opset=opset)


def external_model(location):
    w = TensorProto()
    w.name = "w"
    w.data_type = TensorProto.FLOAT
    w.dims.extend([2, 3])
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", "24")):
        entry = w.external_data.add()
        entry.key = key
        entry.value = value
    return model([helper.make_node("Add", ["x", "w"], ["y"], name="add")],
                 [tensor("x", TensorProto.FLOAT, [2, 3])], [tensor("y", TensorProto.FLOAT, [2, 3])], [w])


def nested_if(depth):
    """An If whose then-branch holds an If, `depth` levels deep."""
    out = tensor("y", TensorProto.FLOAT, [1])
    leaf = helper.make_node("Constant", [], ["y"], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0]))
    leaf_graph = helper.make_graph([leaf], "leaf", [], [out])
    body = leaf_graph
    for level in range(depth):
        node = helper.make_node("If", ["c"], ["y"], name=f"if_{level}", then_branch=body, else_branch=leaf_graph)
        body = helper.make_graph([node], f"level_{level}", [], [out])
    return model(list(body.node), [tensor("c", TensorProto.BOOL, [])], [out])


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    good = relu_model().SerializeToString()
    save(out_dir, "relu.onnx", relu_model())

    # Files that are not ONNX models.
    with open(os.path.join(out_dir, "truncated.onnx"), "wb") as f:
        f.write(good[: len(good) // 2])
    with open(os.path.join(out_dir, "random.onnx"), "wb") as f:
        f.write(bytes(random.Random(7).randrange(256) for _ in range(4096)))
    with open(os.path.join(out_dir, "image.onnx"), "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10\x00\x00\x00\x10\x08\x06\x00\x00\x00")
    open(os.path.join(out_dir, "empty.onnx"), "wb").close()
    os.makedirs(os.path.join(out_dir, "folder.onnx"), exist_ok=True)

    save(out_dir, "opset18.onnx", relu_model(opset=18))

    # Node a reads b's output and b reads a's.
    save(out_dir, "cycle.onnx", model(
        [helper.make_node("Add", ["x", "b_out"], ["a_out"], name="node_a"),
         helper.make_node("Relu", ["a_out"], ["b_out"], name="node_b")],
        [tensor("x", TensorProto.FLOAT, [2])], [tensor("b_out", TensorProto.FLOAT, [2])]))

    save(out_dir, "missing_initializer.onnx", model(
        [helper.make_node("Add", ["x", "weight"], ["y"], name="add_weight")],
        [tensor("x", TensorProto.FLOAT, [2, 3])], [tensor("y", TensorProto.FLOAT, [2, 3])]))

    # Attributes out of range.
    indices = helper.make_tensor("indices", TensorProto.INT64, [1], [0])
    save(out_dir, "gather_axis.onnx", model(
        [helper.make_node("Gather", ["x", "indices"], ["y"], name="gather", axis=7)],
        [tensor("x", TensorProto.FLOAT, [2, 3])], [tensor("y", TensorProto.FLOAT, None)], [indices]))
    save(out_dir, "transpose_perm.onnx", model(
        [helper.make_node("Transpose", ["x"], ["y"], name="transpose", perm=[0, 0])],
        [tensor("x", TensorProto.FLOAT, [2, 3])], [tensor("y", TensorProto.FLOAT, None)]))
    weight = helper.make_tensor("w", TensorProto.FLOAT, [4, 1, 3, 3], [0.5] * 36)
    save(out_dir, "conv_group.onnx", model(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="conv", group=2)],
        [tensor("x", TensorProto.FLOAT, [1, 3, 5, 5])], [tensor("y", TensorProto.FLOAT, None)], [weight]))
    scales = helper.make_tensor("scales", TensorProto.FLOAT, [4], [1.0, 1.0, -2.0, 2.0])
    save(out_dir, "resize_scale.onnx", model(
        [helper.make_node("Resize", ["x", "", "scales"], ["y"], name="resize", mode="nearest")],
        [tensor("x", TensorProto.FLOAT, [1, 1, 2, 2])], [tensor("y", TensorProto.FLOAT, None)], [scales]))

    # An initializer whose header declares 10 GiB of float32 but that holds 16 bytes.
    huge = TensorProto()
    huge.name = "huge"
    huge.data_type = TensorProto.FLOAT
    huge.dims.extend([10, 1024, 1024, 256])
    huge.raw_data = b"\x00" * 16
    save(out_dir, "huge_initializer.onnx", model(
        [helper.make_node("Add", ["x", "huge"], ["y"], name="add_huge")],
        [tensor("x", TensorProto.FLOAT, [1])], [tensor("y", TensorProto.FLOAT, None)], [huge]))

    # External data outside the model's folder, and a missing external file.
    save(out_dir, "external_parent.onnx", external_model("../weights.bin"))
    save(out_dir, "external_absolute.onnx", external_model("/etc/passwd"))
    save(out_dir, "external_missing.onnx", external_model("missing_weights.bin"))

    save(out_dir, "dynamic_batch.onnx", model(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        [tensor("x", TensorProto.FLOAT, ["batch", 3])], [tensor("y", TensorProto.FLOAT, ["batch", 3])]))

    # Two op types without a converter: two NonMaxSuppression nodes and one custom-domain op.
    f32 = TensorProto.FLOAT
    save(out_dir, "two_unsupported.onnx", model(
        [helper.make_node("NonMaxSuppression", ["boxes", "scores"], ["n1"], name="nms_1"),
         helper.make_node("NonMaxSuppression", ["boxes", "scores"], ["n2"], name="nms_2"),
         helper.make_node("StringNormalizer", ["s"], ["t"], name="strings")],
        [tensor("boxes", f32, [1, 4, 4]), tensor("scores", f32, [1, 1, 4]), tensor("s", TensorProto.STRING, [2])],
        [tensor("n1", TensorProto.INT64, None), tensor("n2", TensorProto.INT64, None),
         tensor("t", TensorProto.STRING, None)]))

    save(out_dir, "nested_if.onnx", nested_if(10))

    # A constant subgraph that folds to 40 GB: Expand of one float to 100000 x 100000.
    save(out_dir, "expand_huge.onnx", model(
        [helper.make_node("Expand", ["one", "shape"], ["y"], name="expand")], [],
        [tensor("y", TensorProto.FLOAT, None)],
        [helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0]),
         helper.make_tensor("shape", TensorProto.INT64, [2], [100000, 100000])]))

    # Gather with a constant index past the end of the axis.
    save(out_dir, "gather_index.onnx", model(
        [helper.make_node("Gather", ["x", "far"], ["y"], name="gather_far")],
        [tensor("x", TensorProto.FLOAT, [2, 3])], [tensor("y", TensorProto.FLOAT, None)],
        [helper.make_tensor("far", TensorProto.INT64, [1], [100000000])]))

    # An initializer whose declared element count overflows int64.
    overflow = TensorProto()
    overflow.name = "overflow"
    overflow.data_type = TensorProto.FLOAT
    overflow.dims.extend([2 ** 40, 2 ** 40])
    save(out_dir, "initializer_overflow.onnx", model(
        [helper.make_node("Add", ["x", "overflow"], ["y"], name="add_overflow")],
        [tensor("x", TensorProto.FLOAT, [1])], [tensor("y", TensorProto.FLOAT, None)], [overflow]))

    # Shapes whose size overflows: an input, and the output of a Tile of an input.
    save(out_dir, "input_too_large.onnx", model(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        [tensor("x", TensorProto.FLOAT, [2 ** 62, 2 ** 62])], [tensor("y", TensorProto.FLOAT, None)]))
    save(out_dir, "tile_too_large.onnx", model(
        [helper.make_node("Tile", ["x", "repeats"], ["y"], name="tile")],
        [tensor("x", TensorProto.FLOAT, [2, 3])], [tensor("y", TensorProto.FLOAT, None)],
        [helper.make_tensor("repeats", TensorProto.INT64, [2], [2 ** 40, 2 ** 40])]))

    # Converter inputs that do not fit: Clip-6 (float only) on int32, CastLike without its second input.
    save(out_dir, "clip_int.onnx", model(
        [helper.make_node("Clip", ["x"], ["y"], name="clip", min=0.0)],
        [tensor("x", TensorProto.INT32, [2])], [tensor("y", TensorProto.INT32, None)], opset=6))
    save(out_dir, "castlike_one_input.onnx", model(
        [helper.make_node("CastLike", ["x"], ["y"], name="castlike")],
        [tensor("x", TensorProto.FLOAT, [2])], [tensor("y", TensorProto.FLOAT, None)], opset=15))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
