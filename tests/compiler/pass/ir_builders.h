#pragma once
// Short constructors of flattened IR for pass tests.
#include <string>

#include "compiler/ir/function.h"
#include "compiler/ir/ir.h"
#include "compiler/ir/op.h"

namespace kiln::ir::testing {

// A buffer variable: a handle whose pointee is the element type.
inline Var buffer_var(const std::string &name, DataType dtype = Float(32)) {
  return make_buffer(name, dtype, {Expr(1)}).data;
}
inline Expr load(const Var &buf, Expr index, Expr pred = Expr()) {
  DataType t = buf->pointee.with_lanes(index.type().lanes());
  return LoadNode::make(t, buf, std::move(index), std::move(pred));
}
inline Stmt store(const Var &buf, Expr value, Expr index, Expr pred = Expr()) {
  return StoreNode::make(buf, std::move(value), std::move(index), std::move(pred));
}
inline Stmt loop(const Var &v, Expr min, Expr extent, Stmt body, ForKind kind = ForKind::Serial) {
  return ForNode::make(v, std::move(min), std::move(extent), kind, std::move(body));
}
inline Stmt block(std::vector<Stmt> stmts) { return BlockNode::make(std::move(stmts)); }
inline Expr ramp(Expr base, Expr stride, int lanes) {
  return RampNode::make(std::move(base), std::move(stride), lanes);
}
inline Expr bcast(Expr value, int lanes) { return BroadcastNode::make(std::move(value), lanes); }

}  // namespace kiln::ir::testing
