// The ONNX op converters: for each op type, one converter per version where its semantics or
// signature changed, each turning the node into the op table's (opset 17) form.
#include <cstring>

#include "compiler/frontend/onnx/converter.h"
#include "compiler/graph/op_def.h"
#include "compiler/ir/deploy_dtype.h"

namespace kiln::frontend::onnx {

using graph::Attribute;
using graph::ValueId;
using ::kiln::detail::concat;
using Attrs = std::map<std::string, Attribute>;

namespace {

// The node as the op of the same name, inputs and attributes unchanged.
Converter direct(const std::string &op = "") {
  return [op](ConvertContext &cx, const ::onnx::NodeProto &n) {
    cx.emit_as(n, op.empty() ? n.op_type() : op, cx.inputs(n), cx.attributes(n));
  };
}

// Moves an ints attribute into a constant input at position `pos` (opset changes that turned
// attributes into inputs: Squeeze, Unsqueeze, Split, ReduceSum, Slice, Pad, TopK, ...).
Converter attr_to_input(
    const std::string &op, std::vector<std::pair<std::string, int>> moves,
    std::function<void(ConvertContext &, const ::onnx::NodeProto &, Attrs &, std::vector<ValueId> &)> extra = nullptr) {
  return [op, moves, extra](ConvertContext &cx, const ::onnx::NodeProto &n) {
    std::vector<ValueId> ins = cx.inputs(n);
    Attrs attrs = cx.attributes(n);
    for (const auto &[name, pos] : moves) {
      auto it = attrs.find(name);
      if (it == attrs.end()) continue;
      std::vector<int64_t> v =
          it->second.kind == Attribute::Kind::Int ? std::vector<int64_t>{it->second.i} : it->second.ints;
      attrs.erase(it);
      if (ins.size() <= static_cast<size_t>(pos)) ins.resize(static_cast<size_t>(pos) + 1, graph::kNoValue);
      ins[static_cast<size_t>(pos)] = cx.constant_ints(concat(cx.node_name(n), "_", name), v);
    }
    if (extra) extra(cx, n, attrs, ins);
    while (!ins.empty() && ins.back() == graph::kNoValue) ins.pop_back();
    cx.emit_as(n, op, ins, attrs);
  };
}

void add(std::map<std::string, std::vector<ConverterVersion>> &t, const std::string &op, int64_t since, Converter c) {
  t[op].push_back(ConverterVersion{since, std::move(c)});
}

// Cast's `to` (an ONNX data type number) as a dtype name.
void cast_to_name(ConvertContext &cx, const ::onnx::NodeProto &n, Attrs &attrs) {
  auto it = attrs.find("to");
  if (it == attrs.end()) cx.fail(n, "attribute 'to' is required");
  if (it->second.kind == Attribute::Kind::String) return;  // opset 6 and older spelled it as a name
  const std::string dt = dtype_of_onnx(static_cast<int32_t>(it->second.i));
  if (dt.empty()) cx.fail(n, concat("casting to ONNX type ", it->second.i, " is not supported"));
  it->second = Attribute::of_string(dt);
}

// An op whose attribute `key`, when present, is an ONNX data type number, given to the op table as
// a dtype name (EyeLike's dtype, the windows' output_datatype).
Converter dtype_attr_to_name(const std::string &key) {
  return [key](ConvertContext &cx, const ::onnx::NodeProto &n) {
    Attrs a = cx.attributes(n);
    auto it = a.find(key);
    if (it != a.end() && it->second.kind == Attribute::Kind::Int) {
      const std::string dt = dtype_of_onnx(static_cast<int32_t>(it->second.i));
      if (dt.empty()) cx.fail(n, concat(key, ": ONNX type ", it->second.i, " is not supported"));
      it->second = Attribute::of_string(dt);
    }
    cx.emit_as(n, n.op_type(), cx.inputs(n), a);
  };
}

}  // namespace

const std::map<std::string, std::vector<ConverterVersion>> &converter_table() {
  static const auto table = [] {
    std::map<std::string, std::vector<ConverterVersion>> t;
    // Constant: value (tensor), or value_float(s) / value_int(s).
    add(t, "Constant", 1, [](ConvertContext &cx, const ::onnx::NodeProto &n) {
      Attrs a = cx.attributes(n);
      auto outs = cx.outputs(n);
      if (outs.size() != 1) cx.fail(n, "must have one output");
      if (a.count("value")) {
        if (a["value"].kind != Attribute::Kind::Tensor) cx.fail(n, "value must be a tensor");
        cx.graph().add_constant(outs[0], a["value"].tensor);
      } else if (a.count("value_float")) {
        cx.alias(outs[0], cx.constant_floats(outs[0], {a["value_float"].f}, ir::Float(32), true));
      } else if (a.count("value_floats")) {
        cx.alias(outs[0], cx.constant_floats(outs[0], a["value_floats"].floats, ir::Float(32)));
      } else if (a.count("value_int")) {
        cx.alias(outs[0], cx.constant_ints(outs[0], {a["value_int"].i}, true));
      } else if (a.count("value_ints")) {
        cx.alias(outs[0], cx.constant_ints(outs[0], a["value_ints"].ints));
      } else {
        cx.fail(n, "has no value Kiln supports (sparse values and strings are not supported)");
      }
    });
    add(t, "Cast", 1, [](ConvertContext &cx, const ::onnx::NodeProto &n) {
      Attrs a = cx.attributes(n);
      cast_to_name(cx, n, a);
      a.erase("saturate");
      cx.emit_as(n, "Cast", cx.inputs(n), a);
    });
    add(t, "CastLike", 15, [](ConvertContext &cx, const ::onnx::NodeProto &n) {
      ValueId like = cx.input(n, 1);
      if (like == graph::kNoValue) cx.fail(n, "input 1 (target_type) is required");
      Attrs a;
      a["to"] = Attribute::of_string(graph::dtype_name(cx.graph().value(like).type.dtype));
      cx.emit_as(n, "Cast", {cx.input(n, 0)}, a);
    });
    // Clip: min/max attributes until opset 11, inputs after.
    add(t, "Clip", 1, [](ConvertContext &cx, const ::onnx::NodeProto &n) {
      Attrs a = cx.attributes(n);
      ValueId x = cx.input(n, 0);
      if (x == graph::kNoValue) cx.fail(n, "input 0 is required");
      const ir::DataType dt = cx.graph().value(x).type.dtype;
      if (!dt.is_float()) cx.fail(n, concat("takes a float tensor before opset 11, not ", graph::dtype_name(dt)));
      std::vector<ValueId> ins{x, graph::kNoValue, graph::kNoValue};
      if (a.count("min")) ins[1] = cx.constant_floats(cx.node_name(n) + "_min", {a["min"].f}, dt, true);
      if (a.count("max")) ins[2] = cx.constant_floats(cx.node_name(n) + "_max", {a["max"].f}, dt, true);
      while (ins.back() == graph::kNoValue && ins.size() > 1) ins.pop_back();
      cx.emit_as(n, "Clip", ins, {});
    });
    add(t, "Clip", 11, direct());
    // Dropout: inference is a copy; ratio/is_test attributes of old versions are dropped.
    add(t, "Dropout", 1,
        [](ConvertContext &cx, const ::onnx::NodeProto &n) { cx.emit_as(n, "Dropout", {cx.input(n, 0)}, {}); });
    add(t, "Dropout", 12, [](ConvertContext &cx, const ::onnx::NodeProto &n) {
      Attrs a = cx.attributes(n);
      a.erase("seed");
      cx.emit_as(n, "Dropout", cx.inputs(n), a);
    });
    add(t, "BatchNormalization", 1, [](ConvertContext &cx, const ::onnx::NodeProto &n) {
      Attrs a = cx.attributes(n);
      a.erase("spatial");
      a.erase("momentum");
      a.erase("is_test");
      auto outs = cx.outputs(n);
      if (outs.size() > 1) {
        if (a.count("training_mode") && a["training_mode"].i != 0)
          cx.fail(n, "training mode is not supported: Kiln compiles for inference");
        cx.fail(
            n, "the running mean and variance outputs are only computed in training mode, which Kiln does not support");
      }
      a.erase("training_mode");
      cx.emit("BatchNormalization", cx.inputs(n), a, outs, cx.node_name(n));
    });
    // Squeeze/Unsqueeze: axes attribute until 13.
    add(t, "Squeeze", 1, attr_to_input("Squeeze", {{"axes", 1}}));
    add(t, "Squeeze", 13, direct());
    add(t, "Unsqueeze", 1, attr_to_input("Unsqueeze", {{"axes", 1}}));
    add(t, "Unsqueeze", 13, direct());
    // Split: split attribute until 13.
    add(t, "Split", 1, attr_to_input("Split", {{"split", 1}}));
    add(t, "Split", 13, direct());
    // ReduceSum: axes attribute until 13 (the Reduce ops take either form).
    add(t, "ReduceSum", 1, direct());
    // Slice: attributes until 10.
    add(t, "Slice", 1, attr_to_input("Slice", {{"starts", 1}, {"ends", 2}, {"axes", 3}}));
    add(t, "Slice", 10, direct());
    // Pad: pads and value attributes until 11.
    add(t, "Pad", 1, [](ConvertContext &cx, const ::onnx::NodeProto &n) {
      Attrs a = cx.attributes(n);
      ValueId x = cx.input(n, 0);
      if (x == graph::kNoValue) cx.fail(n, "input 0 is required");
      std::vector<ValueId> ins{x, cx.constant_ints(cx.node_name(n) + "_pads", a["pads"].ints)};
      if (a.count("value")) {
        const ir::DataType dt = cx.graph().value(x).type.dtype;
        if (dt.is_float()) ins.push_back(cx.constant_floats(cx.node_name(n) + "_value", {a["value"].f}, dt, true));
      }
      Attrs b;
      if (a.count("mode")) b["mode"] = a["mode"];
      cx.emit_as(n, "Pad", ins, b);
    });
    add(t, "Pad", 11, direct());
    // TopK: k attribute until 10.
    add(t, "TopK", 1, attr_to_input("TopK", {{"k", 1}}));
    add(t, "TopK", 10, direct());
    // Softmax family: the input coerced to 2-D at `axis` until 13.
    for (const char *op : {"Softmax", "LogSoftmax", "Hardmax"}) {
      add(t, op, 1, [op](ConvertContext &cx, const ::onnx::NodeProto &n) {
        Attrs a = cx.attributes(n);
        if (!a.count("axis")) a["axis"] = Attribute::of_int(1);
        a["coerce_2d"] = Attribute::of_int(1);
        cx.emit_as(n, op, cx.inputs(n), a);
      });
      add(t, op, 13, direct());
    }
    // Upsample and Resize-10: scales only, asymmetric coordinates, nearest rounds down.
    auto upsample = [](ConvertContext &cx, const ::onnx::NodeProto &n) {
      Attrs a = cx.attributes(n);
      ValueId scales = cx.input(n, 1);
      if (scales == graph::kNoValue) {
        if (!a.count("scales")) cx.fail(n, "scales are required");
        scales = cx.constant_floats(cx.node_name(n) + "_scales", a["scales"].floats, ir::Float(32));
      }
      std::string mode = a.count("mode") ? a["mode"].s : "nearest";
      if (mode == "bilinear") mode = "linear";
      Attrs b;
      b["mode"] = Attribute::of_string(mode);
      b["coordinate_transformation_mode"] = Attribute::of_string("asymmetric");
      b["nearest_mode"] = Attribute::of_string("floor");
      cx.emit_as(n, "Resize", {cx.input(n, 0), graph::kNoValue, scales}, b);
    };
    add(t, "Upsample", 1, upsample);
    add(t, "Resize", 1, upsample);
    add(t, "Resize", 11, direct());
    add(t, "EyeLike", 1, dtype_attr_to_name("dtype"));
    for (const char *op : {"HannWindow", "HammingWindow", "BlackmanWindow"})
      add(t, op, 1, dtype_attr_to_name("output_datatype"));
    // Scatter (until 11) is ScatterElements without a reduction.
    add(t, "Scatter", 1, direct("ScatterElements"));
    // Every other op of the op table is converted directly: its ONNX form has not changed in a way
    // that matters here across the supported opsets.
    for (const auto &op : graph::op_names()) {
      if (!t.count(op) && !graph::find_op(op)->internal) add(t, op, 1, direct());
    }
    return t;
  }();
  return table;
}

const Converter *find_converter(const std::string &op, int64_t opset) {
  const auto &t = converter_table();
  auto it = t.find(op);
  if (it == t.end()) return nullptr;
  const Converter *best = nullptr;
  for (const auto &v : it->second) {
    if (v.since <= opset) best = &v.convert;
  }
  return best;
}

}  // namespace kiln::frontend::onnx
