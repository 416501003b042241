#include "compiler/interp/evaluate.h"

#include <utility>
#include <vector>

#include "compiler/ir/deploy_dtype.h"
#include "compiler/ir/function.h"
#include "compiler/ir/op.h"

namespace kiln::interp {

namespace {

template <typename T>
void put(std::vector<std::pair<ir::Var, T>> &list, const ir::Var &v, T value) {
  for (auto &entry : list) {
    if (entry.first.same_as(v)) {
      entry.second = std::move(value);
      return;
    }
  }
  list.emplace_back(v, std::move(value));
}

// Wraps `body` in lets that give the bound scalars their values.
template <typename Node, typename T>
T with_scalars(T body, const Bindings &b) {
  const auto &scalars = b.scalars();
  for (auto it = scalars.rbegin(); it != scalars.rend(); ++it) body = Node::make(it->first, it->second, body);
  return body;
}

}  // namespace

Bindings &Bindings::set_int(const ir::Var &v, int64_t value) {
  const ir::DataType t = v.type();
  KILN_CHECK(t.is_scalar() && !t.is_handle(), "cannot bind ", v.name(), " of type ", t.to_string(), " to a number");
  if (t.is_float()) return set(v, ir::FloatImmNode::make(t, static_cast<double>(value)));
  return set(v, ir::IntImmNode::make(t, value));
}

Bindings &Bindings::set(const ir::Var &v, ir::Expr value) {
  KILN_CHECK(value.defined() && value.type() == v.type(), "the value of ", v.name(), " must have its type ",
             v.type().to_string());
  put(scalars_, v, std::move(value));
  return *this;
}

Bindings &Bindings::bind(const ir::Var &data, deploy::Tensor t) {
  KILN_CHECK(data.type().is_handle(), "cannot bind ", data.name(), " of type ", data.type().to_string(),
             " to a tensor");
  KILN_CHECK(t.defined(), "cannot bind ", data.name(), " to an undefined tensor");
  put(buffers_, data, std::move(t));
  return *this;
}

Value evaluate(const ir::Expr &e, const Bindings &b) {
  KILN_CHECK(b.buffers().empty(), "evaluate() binds no buffers; run a statement that loads with execute()");
  return eval_closed(with_scalars<ir::LetNode>(e, b));
}

void execute(const ir::Stmt &s, const Bindings &b, const RunOptions &opt) {
  ir::LoweredFunc f;
  f.name = "execute";
  std::vector<deploy::Tensor> args;
  for (const auto &[data, t] : b.buffers()) {
    ir::Buffer p;
    p.name = data.name();
    p.data = data;
    p.dtype = ir::to_ir_type(t.dtype());
    for (int d = 0; d < t.ndim(); ++d) {
      p.shape.push_back(ir::make_const(ir::Int(64), t.shape()[d]));
      p.strides.push_back(ir::make_const(ir::Int(64), t.strides()[d]));
    }
    f.params.push_back(std::move(p));
    args.push_back(t);
  }
  f.body = with_scalars<ir::LetStmtNode>(s, b);
  run(f, args, opt);
}

}  // namespace kiln::interp
