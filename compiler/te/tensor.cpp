#include "compiler/te/tensor.h"

#include <set>
#include <unordered_set>

#include "compiler/ir/ir_printer.h"
#include "compiler/ir/ir_visitor.h"

namespace kiln::te {

using namespace ir;

Tensor OperationNode::output(int i) const {
  if (i < 0 || i >= num_outputs()) {
    throw ExprError(detail::concat("operation ", name, " has no output ", i));
  }
  return Tensor(shared_from_this(), i);
}

const OperationNode *operation_of(const ir::Producer *p) {
  const auto *op = dynamic_cast<const OperationNode *>(p);
  KILN_CHECK(op || !p, "producer ", p->producer_name(), " is not an operation");
  return op;
}

Operation operation_of(const ir::ProducerRef &p) {
  auto op = std::dynamic_pointer_cast<const OperationNode>(p);
  KILN_CHECK(op || !p, "producer ", p->producer_name(), " is not an operation");
  return op;
}

std::vector<Expr> ComputeOpNode::output_shape(int) const {
  std::vector<Expr> s;
  for (const auto &iv : axis) s.push_back(iv->dom.extent);
  return s;
}

std::vector<Tensor> ComputeOpNode::input_tensors() const {
  std::vector<Tensor> out;
  std::set<std::pair<const OperationNode *, int>> seen;
  for (const auto &b : body) {
    post_order_visit(b, [&](const IRNode *n) {
      if (n->node_type != NodeType::ProducerLoad) return;
      const auto *l = static_cast<const ProducerLoadNode *>(n);
      const Operation op = operation_of(l->producer);
      if (seen.insert({op.get(), l->value_index}).second) out.emplace_back(op, l->value_index);
    });
  }
  return out;
}

IterVar Tensor::axis(size_t i) const {
  const auto *c = dynamic_cast<const ComputeOpNode *>(op_.get());
  if (!c || i >= c->axis.size()) throw ExprError(detail::concat("tensor ", name(), " has no axis ", i));
  return c->axis[i];
}

IterVar Tensor::reduce_axis(size_t i) const {
  const auto *c = dynamic_cast<const ComputeOpNode *>(op_.get());
  if (!c || i >= c->reduce_axis.size()) throw ExprError(detail::concat("tensor ", name(), " has no reduce axis ", i));
  return c->reduce_axis[i];
}

Expr Tensor::operator()(const std::vector<Expr> &indices) const {
  if (!defined()) throw ExprError("read of an undefined tensor");
  auto shp = shape();
  if (indices.size() != shp.size()) {
    throw ExprError(detail::concat("tensor ", name(), " has ", shp.size(), " dimensions but is read with ",
                                   indices.size(), " indices"));
  }
  std::vector<Expr> idx;
  for (const auto &i : indices) {
    if (!i.defined()) throw ExprError("undefined index in a read of tensor " + name());
    if (!i.type().is_int() && !i.type().is_uint()) {
      throw ExprError(
          detail::concat("tensor ", name(), " is read with a non-integer index of type ", i.type().to_string()));
    }
    idx.push_back(i);
  }
  return ProducerLoadNode::make(op_, value_index_, std::move(idx));
}

Var var(const std::string &name, DataType t) { return Var(name, t); }

namespace {

void check_shape(const std::vector<Expr> &shape, const std::string &name) {
  for (size_t i = 0; i < shape.size(); ++i) {
    const auto &e = shape[i];
    if (!e.defined()) throw ExprError(detail::concat("dimension ", i, " of ", name, " is undefined"));
    if (!e.type().is_int() || !e.type().is_scalar()) {
      throw ExprError(detail::concat("dimension ", i, " of ", name, " must be an integer, got ", e.type().to_string()));
    }
    if (auto c = as_const_int(e); c && *c <= 0) {
      throw ExprError(detail::concat("dimension ", i, " of ", name, " must be positive, got ", *c));
    }
  }
}

std::vector<IterVar> make_axes(const std::vector<Expr> &shape) {
  static const char *names[] = {"i", "j", "k", "l", "m", "n"};
  std::vector<IterVar> axes;
  for (size_t i = 0; i < shape.size(); ++i) {
    std::string n = shape.size() <= 6 ? names[i] : "ax" + std::to_string(i);
    Expr ext = shape[i].type() == Int(32) ? shape[i] : cast(Int(32), shape[i]);
    axes.emplace_back(Range(0, ext), Var(n), IterVarType::DataPar);
  }
  return axes;
}

// Reductions may appear only at the top of a compute body; check and collect the axes.
void check_body(const std::vector<Expr> &body, const std::string &name, std::vector<IterVar> *reduce_axis) {
  const ReduceNode *first = nullptr;
  for (size_t i = 0; i < body.size(); ++i) {
    const auto &b = body[i];
    if (!b.defined()) throw ExprError(detail::concat("compute ", name, ": output ", i, " is undefined"));
    const auto *r = b.as<ReduceNode>();
    if (r) {
      if (first && (first->combiner != r->combiner || first->source.size() != r->source.size())) {
        throw ExprError("compute " + name + ": all outputs of a multi-output reduction must share one reducer");
      }
      if (!first) first = r;
      for (const auto &s : r->source) {
        post_order_visit(s, [&](const IRNode *n) {
          if (n->node_type == NodeType::Reduce) {
            throw ExprError("compute " + name + ": a reduction inside a reduction's source; use two computes");
          }
        });
      }
    } else {
      post_order_visit(b, [&](const IRNode *n) {
        if (n->node_type == NodeType::Reduce) {
          throw ExprError("compute " + name +
                          ": a reduction must be the whole body of an output (e.g. C = sum(...)); "
                          "wrap other arithmetic in a separate compute");
        }
      });
    }
  }
  if (first) {
    for (const auto &b : body) {
      if (!b.as<ReduceNode>()) throw ExprError("compute " + name + ": mixes reductions and plain outputs");
    }
    *reduce_axis = first->axis;
    for (const auto &b : body) {
      const auto *r = b.as<ReduceNode>();
      if (r->axis.size() != first->axis.size()) {
        throw ExprError("compute " + name + ": outputs reduce over different axes");
      }
      for (size_t i = 0; i < r->axis.size(); ++i) {
        if (r->axis[i] != first->axis[i]) throw ExprError("compute " + name + ": outputs reduce over different axes");
      }
    }
    std::set<IterVar> seen;
    for (const auto &iv : first->axis) {
      if (!seen.insert(iv).second) {
        throw ExprError("compute " + name + ": reduce axis " + iv->var.name() + " is listed twice");
      }
    }
  }
}

Tensor make_compute(std::vector<Expr> shape, const std::vector<IterVar> &axes, std::vector<Expr> body,
                    const std::string &name, const std::string &tag, int outputs_wanted, std::vector<Tensor> *all) {
  auto op = std::make_shared<ComputeOpNode>();
  op->name = name;
  op->tag = tag;
  op->axis = axes;
  check_body(body, name, &op->reduce_axis);
  op->body = std::move(body);
  Operation o = op;
  if (all) {
    for (int i = 0; i < o->num_outputs(); ++i) all->push_back(o->output(i));
  }
  (void)outputs_wanted;
  (void)shape;
  return o->output(0);
}

}  // namespace

Tensor placeholder(std::vector<Expr> shape, DataType dtype, const std::string &name) {
  check_shape(shape, name);
  if (!dtype.is_scalar() || dtype.is_handle()) {
    throw ExprError("placeholder " + name + ": dtype must be a scalar numeric type, got " + dtype.to_string());
  }
  auto op = std::make_shared<PlaceholderOpNode>();
  op->name = name;
  op->shape = std::move(shape);
  op->dtype = dtype;
  return Operation(op)->output(0);
}

Tensor compute(std::vector<Expr> shape, FCompute f, const std::string &name, const std::string &tag) {
  check_shape(shape, name);
  auto axes = make_axes(shape);
  std::vector<Var> vars;
  for (const auto &a : axes) vars.push_back(a->var);
  Expr b = f(vars);
  if (!b.defined()) throw ExprError("compute " + name + " returned an undefined expression");
  return make_compute(shape, axes, {b}, name, tag, 1, nullptr);
}

Tensor compute(std::vector<Expr> shape, std::function<Expr(Var)> f, const std::string &name, const std::string &tag) {
  if (shape.size() != 1)
    throw ExprError(detail::concat("compute ", name, ": a 1-index function for a ", shape.size(), "-d shape"));
  return compute(std::move(shape), FCompute([&](const std::vector<Var> &v) { return f(v[0]); }), name, tag);
}
Tensor compute(std::vector<Expr> shape, std::function<Expr(Var, Var)> f, const std::string &name,
               const std::string &tag) {
  if (shape.size() != 2)
    throw ExprError(detail::concat("compute ", name, ": a 2-index function for a ", shape.size(), "-d shape"));
  return compute(std::move(shape), FCompute([&](const std::vector<Var> &v) { return f(v[0], v[1]); }), name, tag);
}
Tensor compute(std::vector<Expr> shape, std::function<Expr(Var, Var, Var)> f, const std::string &name,
               const std::string &tag) {
  if (shape.size() != 3)
    throw ExprError(detail::concat("compute ", name, ": a 3-index function for a ", shape.size(), "-d shape"));
  return compute(std::move(shape), FCompute([&](const std::vector<Var> &v) { return f(v[0], v[1], v[2]); }), name, tag);
}
Tensor compute(std::vector<Expr> shape, std::function<Expr(Var, Var, Var, Var)> f, const std::string &name,
               const std::string &tag) {
  if (shape.size() != 4)
    throw ExprError(detail::concat("compute ", name, ": a 4-index function for a ", shape.size(), "-d shape"));
  return compute(std::move(shape), FCompute([&](const std::vector<Var> &v) { return f(v[0], v[1], v[2], v[3]); }), name,
                 tag);
}

std::vector<Tensor> compute_multi(std::vector<Expr> shape, FComputeMulti f, const std::string &name,
                                  const std::string &tag) {
  check_shape(shape, name);
  auto axes = make_axes(shape);
  std::vector<Var> vars;
  for (const auto &a : axes) vars.push_back(a->var);
  auto body = f(vars);
  if (body.empty()) throw ExprError("compute " + name + " returned no outputs");
  std::vector<Tensor> all;
  make_compute(shape, axes, std::move(body), name, tag, 0, &all);
  return all;
}

IterVar reduce_axis(Range dom, const std::string &name) {
  if (!dom.defined()) throw ExprError("reduce axis " + name + " has an undefined range");
  if (!dom.extent.type().is_int() || !dom.min.type().is_int()) {
    throw ExprError("reduce axis " + name + " must have an integer range");
  }
  if (auto c = as_const_int(dom.extent); c && *c <= 0) {
    throw ExprError(detail::concat("reduce axis ", name, " must have a positive extent, got ", *c));
  }
  Expr mn = cast(Int(32), dom.min), ext = cast(Int(32), dom.extent);
  return IterVar(Range(mn, ext), Var(name), IterVarType::CommReduce);
}

namespace {

Expr make_reduce(const char *what, Expr source, std::vector<IterVar> axis, Expr condition,
                 const std::function<Expr(Expr, Expr)> &combine, const std::function<Expr(DataType)> &identity) {
  if (!source.defined()) throw ExprError(std::string(what) + ": undefined source");
  if (axis.empty()) throw ExprError(std::string(what) + ": no reduce axis given");
  for (const auto &iv : axis) {
    if (!iv.defined() || iv->iter_type != IterVarType::CommReduce) {
      throw ExprError(std::string(what) + ": axis " + (iv.defined() ? iv->var.name() : "?") +
                      " is not a reduce axis (make it with reduce_axis)");
    }
  }
  DataType t = source.type();
  Var x("x", t), y("y", t);
  Expr r = combine(x, y);
  if (!r.defined() || r.type() != t) {
    throw ExprError(std::string(what) + ": the combiner must return " + t.to_string());
  }
  Expr id = identity(t);
  if (!id.defined()) throw ExprError(std::string(what) + ": undefined identity");
  id = cast(t, id);
  auto c = make_comm_reducer({x}, {y}, {r}, {id});
  if (condition.defined() && !condition.type().is_bool()) condition = condition != make_zero(condition.type());
  return ReduceNode::make(c, {source}, std::move(axis), condition, 0);
}

}  // namespace

Expr sum(Expr source, std::vector<IterVar> axis, Expr condition) {
  return make_reduce(
      "sum", std::move(source), std::move(axis), std::move(condition), [](Expr a, Expr b) { return a + b; },
      [](DataType t) { return make_zero(t); });
}
Expr max(Expr source, std::vector<IterVar> axis, Expr condition) {
  return make_reduce(
      "max", std::move(source), std::move(axis), std::move(condition), [](Expr a, Expr b) { return ir::max(a, b); },
      [](DataType t) { return min_value(t); });
}
Expr min(Expr source, std::vector<IterVar> axis, Expr condition) {
  return make_reduce(
      "min", std::move(source), std::move(axis), std::move(condition), [](Expr a, Expr b) { return ir::min(a, b); },
      [](DataType t) { return max_value(t); });
}
Expr prod(Expr source, std::vector<IterVar> axis, Expr condition) {
  return make_reduce(
      "prod", std::move(source), std::move(axis), std::move(condition), [](Expr a, Expr b) { return a * b; },
      [](DataType t) { return make_one(t); });
}

Expr Reducer::operator()(Expr source, std::vector<IterVar> axis, Expr condition) const {
  return make_reduce("reducer", std::move(source), std::move(axis), std::move(condition), combine_, identity_);
}

std::vector<Expr> tuple_reduce(FTupleCombine combine, std::vector<Expr> identity, std::vector<Expr> source,
                               std::vector<IterVar> axis, Expr condition) {
  if (source.empty() || source.size() != identity.size()) {
    throw ExprError("tuple_reduce: need one identity per source value");
  }
  if (axis.empty()) throw ExprError("tuple_reduce: no reduce axis given");
  std::vector<Var> lhs, rhs;
  for (size_t i = 0; i < source.size(); ++i) {
    if (!source[i].defined()) throw ExprError("tuple_reduce: undefined source");
    lhs.emplace_back("x" + std::to_string(i), source[i].type());
    rhs.emplace_back("y" + std::to_string(i), source[i].type());
    identity[i] = cast(source[i].type(), identity[i]);
  }
  auto res = combine(lhs, rhs);
  if (res.size() != source.size()) throw ExprError("tuple_reduce: combiner returns the wrong number of values");
  for (size_t i = 0; i < res.size(); ++i) {
    if (!res[i].defined() || res[i].type() != source[i].type()) {
      throw ExprError(
          detail::concat("tuple_reduce: combiner value ", i, " must have type ", source[i].type().to_string()));
    }
  }
  auto c = make_comm_reducer(lhs, rhs, res, identity);
  if (condition.defined() && !condition.type().is_bool()) condition = condition != make_zero(condition.type());
  std::vector<Expr> out;
  for (size_t i = 0; i < source.size(); ++i) {
    out.push_back(ReduceNode::make(c, source, axis, condition, static_cast<int>(i)));
  }
  return out;
}

std::vector<Operation> post_dfs_order(const std::vector<Operation> &outputs) {
  std::vector<Operation> order;
  std::unordered_set<const OperationNode *> visited;
  // Iterative DFS to survive deep graphs.
  struct Frame {
    Operation op;
    std::vector<Tensor> inputs;
    size_t next = 0;
  };
  for (const auto &out : outputs) {
    if (!out || visited.count(out.get())) continue;
    std::vector<Frame> stack;
    visited.insert(out.get());
    stack.push_back({out, out->input_tensors(), 0});
    while (!stack.empty()) {
      auto &f = stack.back();
      if (f.next < f.inputs.size()) {
        Operation in = f.inputs[f.next++].op();
        if (visited.insert(in.get()).second) stack.push_back({in, in->input_tensors(), 0});
      } else {
        order.push_back(f.op);
        stack.pop_back();
      }
    }
  }
  return order;
}

}  // namespace kiln::te
