#include "compiler/graph/op_def.h"

#include <functional>
#include <map>
#include <mutex>

#include "compiler/graph/op_families.h"
#include "compiler/ir/op.h"

namespace kiln::graph {

using ::kiln::detail::concat;

bool OpContext::has_input(int i) const {
  return i >= 0 && i < num_inputs() && node_.inputs[static_cast<size_t>(i)] != kNoValue;
}

const Value &OpContext::input(int i) const {
  if (!has_input(i)) fail(concat("input ", i, " is required"));
  return graph_.value(node_.inputs[static_cast<size_t>(i)]);
}

namespace {
// The elements of `t` converted to T; `fail` is called (and must throw) for a dtype that cannot be
// read as numbers.
template <class T>
std::vector<T> read_values(const deploy::Tensor &t, const std::function<void(const std::string &)> &fail) {
  const int64_t n = t.numel();
  std::vector<T> out(static_cast<size_t>(n));
  const auto dt = t.dtype();
  const void *p = t.data();
  for (int64_t k = 0; k < n; ++k) {
    T x{};
    if (dt.code == deploy::DType::Float && dt.bits == 32)
      x = static_cast<T>(static_cast<const float *>(p)[k]);
    else if (dt.code == deploy::DType::Float && dt.bits == 64)
      x = static_cast<T>(static_cast<const double *>(p)[k]);
    else if (dt.code == deploy::DType::Int && dt.bits == 64)
      x = static_cast<T>(static_cast<const int64_t *>(p)[k]);
    else if (dt.code == deploy::DType::Int && dt.bits == 32)
      x = static_cast<T>(static_cast<const int32_t *>(p)[k]);
    else if (dt.code == deploy::DType::Int && dt.bits == 16)
      x = static_cast<T>(static_cast<const int16_t *>(p)[k]);
    else if (dt.code == deploy::DType::Int && dt.bits == 8)
      x = static_cast<T>(static_cast<const int8_t *>(p)[k]);
    else if (dt.code == deploy::DType::UInt && (dt.bits == 8 || dt.bits == 1))
      x = static_cast<T>(static_cast<const uint8_t *>(p)[k]);
    else if (dt.code == deploy::DType::UInt && dt.bits == 16)
      x = static_cast<T>(static_cast<const uint16_t *>(p)[k]);
    else if (dt.code == deploy::DType::UInt && dt.bits == 32)
      x = static_cast<T>(static_cast<const uint32_t *>(p)[k]);
    else if (dt.code == deploy::DType::UInt && dt.bits == 64)
      x = static_cast<T>(static_cast<const uint64_t *>(p)[k]);
    else
      fail(dt.to_string());
    out[static_cast<size_t>(k)] = x;
  }
  return out;
}

template <class T>
std::vector<T> read_constant(const OpContext &ctx, int i) {
  const Value &v = ctx.input(i);
  if (!v.is_constant())
    ctx.fail(concat("input ", i, " ('", v.name, "') must be a constant: it sets a shape, an axis or a size, ",
                    "and Kiln compiles static shapes"));
  return read_values<T>(v.constant, [&](const std::string &dtype) {
    ctx.fail(concat("input ", i, " is ", dtype, ", which cannot be read as a compile-time value"));
  });
}
}  // namespace

std::vector<int64_t> OpContext::const_ints(int i) const { return read_constant<int64_t>(*this, i); }
std::vector<double> OpContext::const_floats(int i) const { return read_constant<double>(*this, i); }

void OpContext::fail(const std::string &what) const { throw GraphError(concat(node_.describe(), ": ", what)); }

int64_t OpContext::axis(int64_t a, int64_t rank, const char *what) const {
  if (a < -rank || a >= rank || (rank == 0 && a != 0 && a != -1))
    fail(concat(what, " ", a, " is out of range for rank ", rank));
  return a < 0 ? a + rank : a;
}

const char *pattern_name(OpPattern p) {
  switch (p) {
    case OpPattern::kElemWise:
      return "elemwise";
    case OpPattern::kBroadcast:
      return "broadcast";
    case OpPattern::kInjective:
      return "injective";
    case OpPattern::kCommReduce:
      return "comm_reduce";
    case OpPattern::kOutEWiseFusable:
      return "out_elemwise_fusable";
    case OpPattern::kOpaque:
      return "opaque";
  }
  return "opaque";
}

namespace {
// The fusion pattern of every op type (docs/graph.md, "Fusion patterns"), one list per pattern.
// Pools are out-elementwise-fusable as in TVM; the fusion pass anchors only ops whose kernel takes
// an epilogue. Ops evaluated at compile time and those computed by a template that takes no
// epilogue (Softmax, LayerNormalization) are opaque.
const std::map<std::string, OpPattern> &pattern_table() {
  static const std::map<std::string, OpPattern> table = [] {
    std::map<std::string, OpPattern> t;
    auto add = [&](OpPattern p, std::initializer_list<const char *> names) {
      for (const char *n : names) t.emplace(n, p);
    };
    add(OpPattern::kElemWise,
        {"Abs",       "Acos",       "Acosh",    "Asin",     "Asinh",     "Atan",   "Atanh",   "Ceil",
         "Celu",      "Cos",        "Cosh",     "Elu",      "Erf",       "Exp",    "Floor",   "HardSigmoid",
         "HardSwish", "Identity",   "IsInf",    "IsNaN",    "LeakyRelu", "Log",    "Mish",    "Neg",
         "Not",       "Reciprocal", "Relu",     "Round",    "Selu",      "Shrink", "Sigmoid", "Sign",
         "Sin",       "Sinh",       "Softplus", "Softsign", "Sqrt",      "Tan",    "Tanh",    "ThresholdedRelu",
         "Cast",      "Clip",       "Dropout"});
    add(OpPattern::kBroadcast, {"Add",
                                "Sub",
                                "Mul",
                                "Div",
                                "Pow",
                                "Mod",
                                "BitShift",
                                "And",
                                "Or",
                                "Xor",
                                "Equal",
                                "Greater",
                                "GreaterOrEqual",
                                "Less",
                                "LessOrEqual",
                                "Max",
                                "Min",
                                "Mean",
                                "Sum",
                                "PRelu",
                                "Where",
                                "QuantizeLinear",
                                "DequantizeLinear",
                                "FusedElementwise"});
    add(OpPattern::kInjective, {"Reshape",       "Flatten", "Squeeze", "Unsqueeze", "Transpose",
                                "Concat",        "Split",   "Slice",   "Gather",    "GatherElements",
                                "GatherND",      "Expand",  "Tile",    "Pad",       "DepthToSpace",
                                "SpaceToDepth",  "Trilu",   "Resize",  "OneHot",    kLayoutTransformOp,
                                "FusedInjective"});
    add(OpPattern::kCommReduce, {"ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean",
                                 "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare", "ArgMax", "ArgMin"});
    add(OpPattern::kOutEWiseFusable,
        {"Conv", "ConvTranspose", "MatMul", "Gemm", "FusedConv", "FusedDense", "FusedMatMul", "ConvNCHWc", "MaxPool",
         "AveragePool", "LpPool", "GlobalAveragePool", "GlobalMaxPool", "PoolNCHWc"});
    add(OpPattern::kOpaque, {"Softmax",
                             "LogSoftmax",
                             "Hardmax",
                             "CumSum",
                             "TopK",
                             "BatchNormalization",
                             "LayerNormalization",
                             "InstanceNormalization",
                             "LRN",
                             "MeanVarianceNormalization",
                             "LpNormalization",
                             "Einsum",
                             "ScatterElements",
                             "ScatterND",
                             "DynamicQuantizeLinear",
                             "NegativeLogLikelihoodLoss",
                             "SoftmaxCrossEntropyLoss",
                             "Shape",
                             "Size",
                             "ConstantOfShape",
                             "Range",
                             "EyeLike",
                             "HannWindow",
                             "HammingWindow",
                             "BlackmanWindow"});
    return t;
  }();
  return table;
}

struct Table {
  std::map<std::string, OpDef> ops;
};

Table &table_storage() {
  static Table t;
  return t;
}

const Table &table() {
  static std::once_flag once;
  std::call_once(once, [] {
    detail::register_elementwise_ops();
    detail::register_tensor_ops();
    detail::register_reduce_ops();
    detail::register_nn_ops();
    detail::register_norm_ops();
    detail::register_resize_ops();
    detail::register_extra_ops();
    detail::register_layout_ops();
    detail::register_fused_ops();
  });
  return table_storage();
}
}  // namespace

void detail::register_op(OpDef def) {
  KILN_CHECK(!def.name.empty() && def.infer, "op without a name or inference");
  KILN_CHECK(def.view || def.kernel || def.evaluate, "op ", def.name, " has no kernel");
  auto &ops = table_storage().ops;
  KILN_CHECK(!ops.count(def.name), "op ", def.name, " registered twice");
  if (!def.pattern) {
    const auto &patterns = pattern_table();
    auto it = patterns.find(def.name);
    if (it != patterns.end()) def.pattern = it->second;
  }
  std::string n = def.name;
  ops.emplace(n, std::move(def));
}

const OpDef *find_op(const std::string &name) {
  const auto &ops = table().ops;
  auto it = ops.find(name);
  return it == ops.end() ? nullptr : &it->second;
}

std::vector<std::string> op_names() {
  std::vector<std::string> names;
  for (const auto &[n, d] : table().ops) names.push_back(n);
  return names;
}

OpPattern op_pattern(const std::string &op) {
  const OpDef *def = find_op(op);
  return def && def->pattern ? *def->pattern : OpPattern::kOpaque;
}

std::vector<TensorType> infer_types(const Graph &g, const Node &n) {
  const OpDef *def = find_op(n.op);
  if (!def) throw GraphError(concat(n.describe(), ": unknown op type '", n.op, "'"));
  OpContext ctx(g, n);
  const int ni = ctx.num_inputs();
  if (ni < def->min_inputs || ni > def->max_inputs)
    ctx.fail(concat("takes ", def->min_inputs,
                    def->min_inputs == def->max_inputs ? "" : concat(" to ", def->max_inputs), " inputs, got ", ni));
  const int no = ctx.num_outputs();
  if (no < def->min_outputs || no > def->max_outputs)
    ctx.fail(concat("gives ", def->min_outputs,
                    def->min_outputs == def->max_outputs ? "" : concat(" to ", def->max_outputs), " outputs, got ",
                    no));
  for (int i = 0; i < def->min_inputs; ++i) {
    if (!ctx.has_input(i)) ctx.fail(concat("input ", i, " is required"));
  }
  // Compile-time inputs must be constants, checked here so that the error comes at import.
  for (int c : def->const_inputs) {
    if (ctx.has_input(c) && !ctx.input(c).is_constant()) ctx.const_ints(c);
  }
  std::vector<TensorType> types = def->infer(ctx);
  if (static_cast<int>(types.size()) < no) ctx.fail(concat("inference gave ", types.size(), " outputs for ", no));
  types.resize(static_cast<size_t>(no));
  for (const auto &t : types) {
    for (int64_t d : t.shape) {
      if (d < 0) ctx.fail(concat("an output would have the negative shape ", t.str()));
    }
    if (!t.size_fits()) ctx.fail(concat("an output would be too large: ", t.str()));
  }
  return types;
}

std::vector<double> tensor_values(const deploy::Tensor &t) {
  return read_values<double>(t, [](const std::string &dtype) {
    throw GraphError(concat("a tensor of ", dtype, " cannot be read as numbers"));
  });
}

double node_flops(const Graph &g, const Node &n) {
  const OpDef *def = find_op(n.op);
  if (!def || def->view || def->evaluate) return 0;
  OpContext ctx(g, n);
  if (def->flops) return def->flops(ctx);
  double total = 0;
  for (ValueId o : n.outputs) total += static_cast<double>(g.value(o).type.numel());
  return total;
}

namespace detail {
using ::kiln::detail::concat;

std::vector<ir::Expr> kernel_shape(const std::vector<int64_t> &shape) {
  std::vector<ir::Expr> s;
  for (int64_t d : shape) s.push_back(ir::make_const(ir::Int(32), d));
  if (s.empty()) s.push_back(ir::make_const(ir::Int(32), int64_t{1}));
  return s;
}

te::Tensor add_input(Kernel &k, const OpContext &ctx, int i, const std::string &name) {
  if (ctx.binding()) return (*ctx.binding())(i);
  const TensorType &t = ctx.in(i);
  te::Tensor p = te::placeholder(kernel_shape(t.shape), t.dtype, name.empty() ? concat("in", i) : name);
  k.placeholders.push_back(p);
  k.input_map.push_back(i);
  return p;
}

ir::Expr at(const te::Tensor &t, int rank, const std::vector<ir::Expr> &index) {
  if (rank == 0) return t(std::vector<ir::Expr>{ir::make_const(ir::Int(32), int64_t{0})});
  return t(index);
}

te::Tensor compute(const std::vector<int64_t> &shape, const std::function<ir::Expr(const std::vector<ir::Expr> &)> &f,
                   const std::string &name) {
  const bool scalar = shape.empty();
  return te::compute(
      kernel_shape(shape),
      [&](const std::vector<ir::Var> &vars) {
        std::vector<ir::Expr> idx;
        if (!scalar) {
          for (const auto &v : vars) idx.push_back(v);
        }
        return f(idx);
      },
      name);
}

std::vector<int64_t> broadcast_shapes(const OpContext &ctx, const std::vector<std::vector<int64_t>> &shapes) {
  size_t rank = 0;
  for (const auto &s : shapes) rank = std::max(rank, s.size());
  std::vector<int64_t> out(rank, 1);
  for (const auto &s : shapes) {
    for (size_t k = 0; k < s.size(); ++k) {
      int64_t &o = out[rank - s.size() + k];
      int64_t d = s[k];
      if (d == o || d == 1) continue;
      if (o == 1) {
        o = d;
        continue;
      }
      std::string list;
      for (const auto &t : shapes)
        list += concat(list.empty() ? "" : ", ", TensorType{ir::Float(32), t}.str().substr(7));
      ctx.fail(concat("input shapes ", list, " do not broadcast"));
    }
  }
  return out;
}

std::vector<ir::Expr> broadcast_index(const std::vector<int64_t> &in, const std::vector<ir::Expr> &index) {
  std::vector<ir::Expr> r;
  const size_t off = index.size() - in.size();
  for (size_t k = 0; k < in.size(); ++k) {
    r.push_back(in[k] == 1 ? ir::make_const(ir::Int(32), int64_t{0}) : index[off + k]);
  }
  return r;
}

}  // namespace detail

}  // namespace kiln::graph
