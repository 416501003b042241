#pragma once
// The op table of the graph IR: for every op type, how many inputs and outputs it takes, which
// inputs are read at compile time (shapes, axes, pads: they must be constants), its shape and type
// inference, and its kernel: either an operator template of compiler/ops with arguments (the same
// workload the tuner tunes), or a tensor-expression compute that the executor schedules generically.
//
// Op types and their semantics are ONNX's latest (opset 17) ones. A frontend converts older
// versions of an op into this form (compiler/frontend/onnx/converters.cpp); passes and the executor
// see one definition per op.
//
// Ops are defined in the op_*.cpp files of this folder, one family per file; see docs/graph.md for
// how to add one.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "compiler/graph/graph.h"
#include "compiler/ir/op.h"
#include "compiler/te/tensor.h"
#include "contracts/json.h"

namespace kiln::graph {

// What an op's functions see of a node: its attributes, its input values (types and, for constants,
// their data), and a way to fail naming the node.
class OpContext {
 public:
  OpContext(const Graph &g, const Node &n) : graph_(g), node_(n) {}

  const Graph &graph() const { return graph_; }
  const Node &node() const { return node_; }
  int num_inputs() const { return static_cast<int>(node_.inputs.size()); }
  int num_outputs() const { return static_cast<int>(node_.outputs.size()); }
  // Whether input i is given (an optional input may be absent or kNoValue).
  bool has_input(int i) const;
  const Value &input(int i) const;
  const TensorType &in(int i) const { return input(i).type; }
  // The values of a constant input converted to integers or doubles, or a GraphError naming the
  // node and the input when it is not a constant.
  std::vector<int64_t> const_ints(int i) const;
  std::vector<double> const_floats(int i) const;
  bool is_constant(int i) const { return has_input(i) && input(i).is_constant(); }

  // For a node built inside a composite kernel (FusedInjective, op_fused.cpp): the tensor that stands
  // for input i (another member's output, or the composite's placeholder), which add_input returns
  // instead of making a placeholder. Unset for a node built as a kernel of its own.
  using InputBinding = std::function<te::Tensor(int i)>;
  void bind_inputs(const InputBinding *b) { binding_ = b; }
  const InputBinding *binding() const { return binding_; }

  // GraphError "node 'name' (Op): what".
  [[noreturn]] void fail(const std::string &what) const;
  // An axis in [-rank, rank) made non-negative, or a GraphError naming `what`.
  int64_t axis(int64_t a, int64_t rank, const char *what = "axis") const;

 private:
  const Graph &graph_;
  const Node &node_;
  const InputBinding *binding_ = nullptr;
};

// How the executor builds a node's kernel. Either
//  - template_name and template_args: a workload of the operator library, built at its default
//    config (or a tuned one); its inputs are the node inputs listed in input_map, in order; or
//  - outputs (and placeholders): a tensor-expression compute of the node's outputs from placeholders
//    of the node inputs listed in input_map, in order, scheduled generically.
// Rank-0 tensors are passed to kernels as shape [1].
struct Kernel {
  std::string template_name;
  contracts::Json template_args;
  std::vector<te::Tensor> placeholders;
  std::vector<te::Tensor> outputs;
  std::vector<int> input_map;
  // The compute's one output is a LayoutTransform to or from NCHW of what the rest of the compute
  // makes (a FusedInjective group ending in one): scheduled as layout_transform.x86's default, the
  // rest inlined into it, rather than generically.
  bool layout_transform_output = false;
};

// The fusion pattern of an op, a lattice ordered from the easiest to fuse to the hardest (TVM's
// OpPatternKind): a pass may fuse a node of a lower pattern into the kernel of one of a higher
// pattern where the rules of docs/graph.md allow.
//  - kElemWise: output element i reads input element i of inputs of the output's shape (Relu, Cast).
//  - kBroadcast: output element i reads inputs broadcast numpy-style to the output (Add, Where).
//  - kInjective: each output element is one input element at a computed index (Reshape,
//    Transpose, Pad, Concat, Gather, LayoutTransform).
//  - kCommReduce: a commutative reduction over axes (ReduceSum, ArgMax).
//  - kOutEWiseFusable: a complex op whose output can take elementwise ops as an epilogue (Conv,
//    MatMul, Gemm, pools, FusedConv).
//  - kOpaque: nothing fuses into or after it (Softmax, TopK, LayerNormalization, compile-time ops).
enum class OpPattern {
  kElemWise = 0,
  kBroadcast = 1,
  kInjective = 2,
  kCommReduce = 3,
  kOutEWiseFusable = 4,
  kOpaque = 5
};

// "elemwise", "broadcast", "injective", "comm_reduce", "out_elemwise_fusable", "opaque".
const char *pattern_name(OpPattern p);

struct OpDef {
  std::string name;
  // The fusion pattern. Left unset by an op's family file, it is taken from op_def.cpp's table at
  // registration; an op that has neither is a defect (checked by tests/compiler/graph).
  std::optional<OpPattern> pattern;
  int min_inputs = 1;
  int max_inputs = 1;
  int min_outputs = 1;
  int max_outputs = 1;
  // Inputs read at compile time (they must be constants) and not passed to the kernel.
  std::vector<int> const_inputs;
  // Output 0 is input 0's data with the inferred shape: no kernel runs (Reshape, Squeeze, ...).
  bool view = false;
  // An op of Kiln's own that the graph passes make (FusedConv); frontends never produce it.
  bool internal = false;
  // The types of the node's outputs (as many as the node has). Throws GraphError (ctx.fail).
  std::function<std::vector<TensorType>(const OpContext &ctx)> infer;
  // The kernel; unused for view ops and ops with `evaluate`.
  std::function<Kernel(const OpContext &ctx)> kernel;
  // For ops whose outputs follow from types and compile-time inputs alone (Shape, Size,
  // ConstantOfShape, Range): the outputs' data. Frontends fold such nodes into constants.
  std::function<std::vector<deploy::Tensor>(const OpContext &ctx)> evaluate;
  // Floating-point (or integer) operations of one run, for summaries; absent means one per output
  // element.
  std::function<double(const OpContext &ctx)> flops;
};

// The op table.
const OpDef *find_op(const std::string &name);
std::vector<std::string> op_names();

// The fusion pattern of an op type; kOpaque for an unknown op or one without a pattern.
OpPattern op_pattern(const std::string &op);

// The node's outputs' types by the op's inference, after checking the input and output counts;
// throws GraphError naming the node.
std::vector<TensorType> infer_types(const Graph &g, const Node &n);

// A tensor's values as doubles (any dtype but float16), row-major.
std::vector<double> tensor_values(const deploy::Tensor &t);

// The operations of one run of node `n` (multiply-adds count two); 0 for views and compile-time ops.
double node_flops(const Graph &g, const Node &n);

// Helpers for op definitions.
// The internal op the layout pass inserts between a producer and a consumer that disagree on a
// tensor's layout (op_layout.cpp).
inline constexpr const char *kLayoutTransformOp = "LayoutTransform";

namespace detail {
// An int32 constant: the type of kernel indices.
inline ir::Expr i32(int64_t v) { return ir::make_const(ir::Int(32), v); }
// Shapes for kernels: a rank-0 shape becomes [1].
std::vector<ir::Expr> kernel_shape(const std::vector<int64_t> &shape);
// A placeholder for node input i (also recorded in k.input_map and k.placeholders); inside a
// composite kernel, the tensor the context binds input i to (nothing recorded in k).
te::Tensor add_input(Kernel &k, const OpContext &ctx, int i, const std::string &name = "");
// An element of a tensor of logical rank `rank` (a rank-0 tensor is read at [0]).
ir::Expr at(const te::Tensor &t, int rank, const std::vector<ir::Expr> &index);
// A compute of the logical shape `shape` (rank 0 allowed).
te::Tensor compute(const std::vector<int64_t> &shape, const std::function<ir::Expr(const std::vector<ir::Expr> &)> &f,
                   const std::string &name);
// Numpy-style broadcast of shapes; fails naming the node when they do not broadcast.
std::vector<int64_t> broadcast_shapes(const OpContext &ctx, const std::vector<std::vector<int64_t>> &shapes);
// The index into an input of shape `in` of an element at `index` of the broadcast output.
std::vector<ir::Expr> broadcast_index(const std::vector<int64_t> &in, const std::vector<ir::Expr> &index);
// Registration, used by each op family's file.
void register_op(OpDef def);
}  // namespace detail

}  // namespace kiln::graph
