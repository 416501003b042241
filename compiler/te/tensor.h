#pragma once
// Tensor expressions: what is computed. Placeholders are inputs; compute ops define every output
// element by an expression of its indices; reductions run over reduce axes.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "compiler/ir/ir.h"
#include "compiler/ir/op.h"

namespace kiln::te {

using ir::DataType;
using ir::Expr;
using ir::IterVar;
using ir::Range;
using ir::Var;

class Tensor;

// An operation: the producer of one or more tensors, and what the IR's ProducerLoad, ProducerStore
// and ProducerRealize nodes refer to.
class OperationNode : public ir::Producer, public std::enable_shared_from_this<OperationNode> {
 public:
  enum class Kind { Placeholder, Compute };

  Kind kind;
  std::string name;
  std::string tag;

  const std::string &producer_name() const override { return name; }
  int num_outputs() const override = 0;
  DataType output_dtype(int i) const override = 0;
  virtual std::vector<Expr> output_shape(int i) const = 0;
  // The tensors this operation reads.
  virtual std::vector<Tensor> input_tensors() const = 0;
  Tensor output(int i) const;

 protected:
  explicit OperationNode(Kind k) : kind(k) {}
};
using Operation = std::shared_ptr<const OperationNode>;

class PlaceholderOpNode : public OperationNode {
 public:
  PlaceholderOpNode() : OperationNode(Kind::Placeholder) {}
  std::vector<Expr> shape;
  DataType dtype;
  int num_outputs() const override { return 1; }
  DataType output_dtype(int) const override { return dtype; }
  std::vector<Expr> output_shape(int) const override { return shape; }
  std::vector<Tensor> input_tensors() const override { return {}; }
};

class ComputeOpNode : public OperationNode {
 public:
  ComputeOpNode() : OperationNode(Kind::Compute) {}
  std::vector<IterVar> axis;         // data-parallel axes, one per output dimension
  std::vector<IterVar> reduce_axis;  // empty unless the body is a reduction
  std::vector<Expr> body;            // one per output; all Reduce (same combiner) or none
  int num_outputs() const override { return static_cast<int>(body.size()); }
  DataType output_dtype(int i) const override { return body.at(i).type(); }
  std::vector<Expr> output_shape(int i) const override;
  std::vector<Tensor> input_tensors() const override;
  bool is_reduction() const { return !reduce_axis.empty(); }
};

// A tensor: output `value_index` of an operation. Identity is (op, value_index).
class Tensor {
 public:
  Tensor() = default;
  Tensor(Operation op, int value_index) : op_(std::move(op)), value_index_(value_index) {}
  bool defined() const { return op_ != nullptr; }
  const Operation &op() const { return op_; }
  int value_index() const { return value_index_; }
  const std::string &name() const { return op_->name; }
  DataType dtype() const { return op_->output_dtype(value_index_); }
  std::vector<Expr> shape() const { return op_->output_shape(value_index_); }
  int ndim() const { return static_cast<int>(shape().size()); }
  bool operator==(const Tensor &o) const { return op_ == o.op_ && value_index_ == o.value_index_; }
  bool operator!=(const Tensor &o) const { return !(*this == o); }
  bool operator<(const Tensor &o) const { return op_ != o.op_ ? op_ < o.op_ : value_index_ < o.value_index_; }

  // Data-parallel axis i and reduce axis i of the compute that makes this tensor: C.axis(0).
  // Throws ExprError for a placeholder or an axis it does not have.
  IterVar axis(size_t i) const;
  IterVar reduce_axis(size_t i) const;

  // An element read: A(i, j). Throws ExprError if the number of indices differs from the rank.
  Expr operator()(const std::vector<Expr> &indices) const;
  template <typename... Args>
  Expr operator()(Args... args) const {
    return (*this)(std::vector<Expr>{Expr(args)...});
  }

 private:
  Operation op_;
  int value_index_ = 0;
};

// A symbolic size or index variable (int32).
Var var(const std::string &name, DataType t = ir::Int(32));

Tensor placeholder(std::vector<Expr> shape, DataType dtype = ir::Float(32), const std::string &name = "placeholder");

using FCompute = std::function<Expr(const std::vector<Var> &)>;
using FComputeMulti = std::function<std::vector<Expr>(const std::vector<Var> &)>;

Tensor compute(std::vector<Expr> shape, FCompute f, const std::string &name = "compute", const std::string &tag = "");
Tensor compute(std::vector<Expr> shape, std::function<Expr(Var)> f, const std::string &name = "compute",
               const std::string &tag = "");
Tensor compute(std::vector<Expr> shape, std::function<Expr(Var, Var)> f, const std::string &name = "compute",
               const std::string &tag = "");
Tensor compute(std::vector<Expr> shape, std::function<Expr(Var, Var, Var)> f, const std::string &name = "compute",
               const std::string &tag = "");
Tensor compute(std::vector<Expr> shape, std::function<Expr(Var, Var, Var, Var)> f, const std::string &name = "compute",
               const std::string &tag = "");
// Several outputs with one shape, computed in one loop nest.
std::vector<Tensor> compute_multi(std::vector<Expr> shape, FComputeMulti f, const std::string &name = "compute",
                                  const std::string &tag = "");

// A reduction axis over [dom.min, dom.min + dom.extent).
IterVar reduce_axis(Range dom, const std::string &name = "k");
inline IterVar reduce_axis(Expr extent, const std::string &name = "k") {
  return reduce_axis(Range(0, std::move(extent)), name);
}

Expr sum(Expr source, std::vector<IterVar> axis, Expr condition = Expr());
Expr max(Expr source, std::vector<IterVar> axis, Expr condition = Expr());
Expr min(Expr source, std::vector<IterVar> axis, Expr condition = Expr());
Expr prod(Expr source, std::vector<IterVar> axis, Expr condition = Expr());

// A user-defined commutative reducer: combine(lhs, rhs) with an identity element per dtype.
class Reducer {
 public:
  using FCombine = std::function<Expr(Expr lhs, Expr rhs)>;
  using FIdentity = std::function<Expr(DataType)>;
  Reducer(FCombine combine, FIdentity identity) : combine_(std::move(combine)), identity_(std::move(identity)) {}
  Expr operator()(Expr source, std::vector<IterVar> axis, Expr condition = Expr()) const;

 private:
  FCombine combine_;
  FIdentity identity_;
};

// Tuple reduction (e.g. argmax): combine((l0..ln), (r0..rn)) -> (v0..vn), with identities.
// Returns one Reduce expression per element, to be used as the bodies of compute_multi.
using FTupleCombine = std::function<std::vector<Expr>(const std::vector<Var> &lhs, const std::vector<Var> &rhs)>;
std::vector<Expr> tuple_reduce(FTupleCombine combine, std::vector<Expr> identity, std::vector<Expr> source,
                               std::vector<IterVar> axis, Expr condition = Expr());

// The operation a producer of the IR stands for (every producer in Kiln's IR is an operation).
const OperationNode *operation_of(const ir::Producer *p);
Operation operation_of(const ir::ProducerRef &p);

// Every operation reachable from `outputs`, inputs before their consumers.
std::vector<Operation> post_dfs_order(const std::vector<Operation> &outputs);

}  // namespace kiln::te
