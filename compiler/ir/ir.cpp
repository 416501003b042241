#include "compiler/ir/ir.h"

#include "compiler/ir/ir_printer.h"

namespace kiln::ir {

const char *node_type_name(NodeType t) {
  switch (t) {
#define KILN_NAME(n) \
  case NodeType::n:  \
    return #n;
    KILN_EXPR_NODES(KILN_NAME)
    KILN_STMT_NODES(KILN_NAME)
#undef KILN_NAME
  }
  return "?";
}

const char *for_kind_name(ForKind k) {
  switch (k) {
    case ForKind::Serial:
      return "serial";
    case ForKind::Parallel:
      return "parallel";
    case ForKind::Vectorized:
      return "vectorized";
    case ForKind::Unrolled:
      return "unrolled";
    case ForKind::ThreadBinding:
      return "thread_binding";
  }
  return "?";
}

Expr::Expr(int v) : ptr_(std::make_shared<IntImmNode>(Int(32), v)) {}
Expr::Expr(int64_t v) : ptr_(std::make_shared<IntImmNode>(Int(64), v)) {}
Expr::Expr(float v) : ptr_(std::make_shared<FloatImmNode>(Float(32), v)) {}
Expr::Expr(double v) : ptr_(std::make_shared<FloatImmNode>(Float(32), v)) {}

DataType Expr::type() const {
  KILN_CHECK(ptr_, "type() of an undefined expression");
  return ptr_->type;
}
NodeType Expr::node_type() const {
  KILN_CHECK(ptr_, "node_type() of an undefined expression");
  return ptr_->node_type;
}
NodeType Stmt::node_type() const {
  KILN_CHECK(ptr_, "node_type() of an undefined statement");
  return ptr_->node_type;
}

Var::Var(const std::string &name, DataType t) : Expr(std::make_shared<VariableNode>(t, name)) {}
Var::Var(const Expr &e) : Expr(e) { KILN_CHECK(e.as<VariableNode>(), "Var from a non-variable expression"); }
const VariableNode *Var::get() const { return static_cast<const VariableNode *>(Expr::get()); }
const std::string &Var::name() const { return get()->name; }

IterVar::IterVar(Range dom, Var var, IterVarType type, std::string thread_tag)
    : ptr_(std::make_shared<IterVarNode>(IterVarNode{std::move(dom), std::move(var), type, std::move(thread_tag)})) {}

CommReducer make_comm_reducer(std::vector<Var> lhs, std::vector<Var> rhs, std::vector<Expr> result,
                              std::vector<Expr> identity) {
  if (lhs.size() != rhs.size() || lhs.size() != result.size() || lhs.size() != identity.size() || lhs.empty()) {
    throw ExprError("a reducer needs as many lhs, rhs, result and identity values (and at least one)");
  }
  for (size_t i = 0; i < lhs.size(); ++i) {
    if (result[i].type() != lhs[i].type() || identity[i].type() != lhs[i].type()) {
      throw ExprError(detail::concat("reducer value ", i, ": result ", result[i].type().to_string(), " and identity ",
                                     identity[i].type().to_string(), " must have type ", lhs[i].type().to_string()));
    }
  }
  return std::make_shared<CommReducerNode>(
      CommReducerNode{std::move(lhs), std::move(rhs), std::move(result), std::move(identity)});
}

namespace {

void check_defined(const Expr &e, const char *what, const char *node) {
  KILN_CHECK(e.defined(), node, ": undefined ", what);
}

void check_same_type(const Expr &a, const Expr &b, const char *node) {
  check_defined(a, "a", node);
  check_defined(b, "b", node);
  KILN_CHECK(a.type() == b.type(), node, ": operand types differ: ", a.type().to_string(), " vs ", b.type().to_string(),
             " in ", a, " and ", b);
}

}  // namespace

Expr IntImmNode::make(DataType t, int64_t value) {
  KILN_CHECK(t.is_integer_like() && t.is_scalar(), "IntImm of type ", t.to_string());
  if (t.is_bool()) value = value != 0;
  return Expr(std::make_shared<IntImmNode>(t, value));
}

Expr FloatImmNode::make(DataType t, double value) {
  KILN_CHECK(t.is_float() && t.is_scalar(), "FloatImm of type ", t.to_string());
  if (t.bits() == 32) value = static_cast<float>(value);
  return Expr(std::make_shared<FloatImmNode>(t, value));
}

Expr StringImmNode::make(std::string value) { return Expr(std::make_shared<StringImmNode>(std::move(value))); }

Expr CastNode::make(DataType t, Expr value) {
  check_defined(value, "value", "Cast");
  KILN_CHECK(t.lanes() == value.type().lanes(), "Cast changes lanes: ", value.type().to_string(), " to ",
             t.to_string());
  return Expr(std::make_shared<CastNode>(t, std::move(value)));
}

#define KILN_ARITH_MAKE(n)                                                 \
  Expr n##Node::make(Expr a, Expr b) {                                     \
    check_same_type(a, b, #n);                                             \
    DataType t = a.type();                                                 \
    return Expr(std::make_shared<n##Node>(t, std::move(a), std::move(b))); \
  }
KILN_ARITH_MAKE(Add)
KILN_ARITH_MAKE(Sub)
KILN_ARITH_MAKE(Mul)
KILN_ARITH_MAKE(Div)
KILN_ARITH_MAKE(Mod)
KILN_ARITH_MAKE(FloorDiv)
KILN_ARITH_MAKE(FloorMod)
KILN_ARITH_MAKE(Min)
KILN_ARITH_MAKE(Max)
#undef KILN_ARITH_MAKE

#define KILN_CMP_MAKE(n)                                                   \
  Expr n##Node::make(Expr a, Expr b) {                                     \
    check_same_type(a, b, #n);                                             \
    DataType t = Bool(a.type().lanes());                                   \
    return Expr(std::make_shared<n##Node>(t, std::move(a), std::move(b))); \
  }
KILN_CMP_MAKE(EQ)
KILN_CMP_MAKE(NE)
KILN_CMP_MAKE(LT)
KILN_CMP_MAKE(LE)
KILN_CMP_MAKE(GT)
KILN_CMP_MAKE(GE)
#undef KILN_CMP_MAKE

#define KILN_LOGIC_MAKE(n)                                                                    \
  Expr n##Node::make(Expr a, Expr b) {                                                        \
    check_same_type(a, b, #n);                                                                \
    KILN_CHECK(a.type().is_bool(), #n ": operands must be bool, got ", a.type().to_string()); \
    DataType t = a.type();                                                                    \
    return Expr(std::make_shared<n##Node>(t, std::move(a), std::move(b)));                    \
  }
KILN_LOGIC_MAKE(And)
KILN_LOGIC_MAKE(Or)
#undef KILN_LOGIC_MAKE

Expr NotNode::make(Expr a) {
  check_defined(a, "a", "Not");
  KILN_CHECK(a.type().is_bool(), "Not: operand must be bool, got ", a.type().to_string());
  DataType t = a.type();
  return Expr(std::make_shared<NotNode>(t, std::move(a)));
}

Expr SelectNode::make(Expr condition, Expr true_value, Expr false_value) {
  check_defined(condition, "condition", "Select");
  check_same_type(true_value, false_value, "Select");
  KILN_CHECK(condition.type().is_bool(), "Select: condition must be bool");
  KILN_CHECK(condition.type().lanes() == 1 || condition.type().lanes() == true_value.type().lanes(),
             "Select: condition lanes");
  DataType t = true_value.type();
  return Expr(std::make_shared<SelectNode>(t, std::move(condition), std::move(true_value), std::move(false_value)));
}

Expr RampNode::make(Expr base, Expr stride, int lanes) {
  check_same_type(base, stride, "Ramp");
  KILN_CHECK(base.type().is_scalar() && lanes > 1, "Ramp: scalar base and lanes > 1");
  DataType t = base.type().with_lanes(lanes);
  return Expr(std::make_shared<RampNode>(t, std::move(base), std::move(stride), lanes));
}

Expr BroadcastNode::make(Expr value, int lanes) {
  check_defined(value, "value", "Broadcast");
  KILN_CHECK(value.type().is_scalar() && lanes > 1, "Broadcast: scalar value and lanes > 1");
  DataType t = value.type().with_lanes(lanes);
  return Expr(std::make_shared<BroadcastNode>(t, std::move(value), lanes));
}

Expr LetNode::make(Var var, Expr value, Expr body) {
  check_defined(value, "value", "Let");
  check_defined(body, "body", "Let");
  KILN_CHECK(var.type() == value.type(), "Let: variable and value types differ");
  DataType t = body.type();
  return Expr(std::make_shared<LetNode>(t, std::move(var), std::move(value), std::move(body)));
}

Expr CallNode::make(DataType t, std::string name, std::vector<Expr> args, Kind kind) {
  for (const auto &a : args) check_defined(a, "argument", "Call");
  return Expr(std::make_shared<CallNode>(t, std::move(name), std::move(args), kind));
}

Expr LoadNode::make(DataType t, Var buffer_var, Expr index, Expr predicate) {
  check_defined(index, "index", "Load");
  KILN_CHECK(index.type().lanes() == t.lanes(), "Load: index lanes ", index.type().lanes(), " != type lanes ",
             t.lanes());
  return Expr(std::make_shared<LoadNode>(t, std::move(buffer_var), std::move(index), std::move(predicate)));
}

Expr ProducerLoadNode::make(ProducerRef producer, int value_index, std::vector<Expr> indices) {
  KILN_CHECK(producer, "ProducerLoad of a null producer");
  KILN_CHECK(value_index >= 0 && value_index < producer->num_outputs(), "ProducerLoad: bad value index");
  for (const auto &i : indices) check_defined(i, "index", "ProducerLoad");
  DataType t = producer->output_dtype(value_index);
  return Expr(std::make_shared<ProducerLoadNode>(t, std::move(producer), value_index, std::move(indices)));
}

Expr ReduceNode::make(CommReducer combiner, std::vector<Expr> source, std::vector<IterVar> axis, Expr condition,
                      int value_index) {
  KILN_CHECK(combiner, "Reduce: null combiner");
  KILN_CHECK(source.size() == combiner->lhs.size(), "Reduce: source count differs from reducer arity");
  KILN_CHECK(value_index >= 0 && value_index < static_cast<int>(source.size()), "Reduce: bad value index");
  if (!condition.defined()) condition = IntImmNode::make(Bool(), 1);
  DataType t = source[value_index].type();
  return Expr(std::make_shared<ReduceNode>(t, std::move(combiner), std::move(source), std::move(axis),
                                           std::move(condition), value_index));
}

Stmt LetStmtNode::make(Var var, Expr value, Stmt body) {
  check_defined(value, "value", "LetStmt");
  KILN_CHECK(body.defined(), "LetStmt: undefined body");
  KILN_CHECK(var.type() == value.type(), "LetStmt: variable and value types differ");
  return Stmt(std::make_shared<LetStmtNode>(std::move(var), std::move(value), std::move(body)));
}

Stmt AttrStmtNode::make(Expr node, std::string key, Expr value, Stmt body) {
  KILN_CHECK(body.defined(), "AttrStmt: undefined body");
  return Stmt(std::make_shared<AttrStmtNode>(std::move(node), std::move(key), std::move(value), std::move(body)));
}

Stmt AssertStmtNode::make(Expr condition, std::string message, Stmt body) {
  check_defined(condition, "condition", "AssertStmt");
  KILN_CHECK(body.defined(), "AssertStmt: undefined body");
  return Stmt(std::make_shared<AssertStmtNode>(std::move(condition), std::move(message), std::move(body)));
}

Stmt StoreNode::make(Var buffer_var, Expr value, Expr index, Expr predicate) {
  check_defined(value, "value", "Store");
  check_defined(index, "index", "Store");
  KILN_CHECK(value.type().lanes() == index.type().lanes(), "Store: value lanes ", value.type().lanes(),
             " != index lanes ", index.type().lanes());
  return Stmt(
      std::make_shared<StoreNode>(std::move(buffer_var), std::move(value), std::move(index), std::move(predicate)));
}

Stmt ProducerStoreNode::make(ProducerRef producer, int value_index, Expr value, std::vector<Expr> indices) {
  KILN_CHECK(producer, "ProducerStore of a null producer");
  check_defined(value, "value", "ProducerStore");
  return Stmt(
      std::make_shared<ProducerStoreNode>(std::move(producer), value_index, std::move(value), std::move(indices)));
}

Stmt AllocateNode::make(Var buffer_var, DataType dtype, std::vector<Expr> extents, std::string scope, Stmt body) {
  KILN_CHECK(body.defined(), "Allocate: undefined body");
  for (const auto &e : extents) check_defined(e, "extent", "Allocate");
  return Stmt(std::make_shared<AllocateNode>(std::move(buffer_var), dtype, std::move(extents), std::move(scope),
                                             std::move(body)));
}

Stmt ForNode::make(Var loop_var, Expr min, Expr extent, ForKind kind, Stmt body, std::string thread_tag) {
  check_defined(min, "min", "For");
  check_defined(extent, "extent", "For");
  KILN_CHECK(body.defined(), "For: undefined body");
  KILN_CHECK(min.type().is_scalar() && extent.type().is_scalar(), "For: vector bounds");
  return Stmt(std::make_shared<ForNode>(std::move(loop_var), std::move(min), std::move(extent), kind, std::move(body),
                                        std::move(thread_tag)));
}

Stmt IfThenElseNode::make(Expr condition, Stmt then_case, Stmt else_case) {
  check_defined(condition, "condition", "IfThenElse");
  KILN_CHECK(then_case.defined(), "IfThenElse: undefined then case");
  return Stmt(std::make_shared<IfThenElseNode>(std::move(condition), std::move(then_case), std::move(else_case)));
}

Stmt BlockNode::make(std::vector<Stmt> stmts) {
  std::vector<Stmt> flat;
  for (auto &s : stmts) {
    if (!s.defined() || is_nop(s)) continue;
    if (const auto *b = s.as<BlockNode>()) {
      flat.insert(flat.end(), b->stmts.begin(), b->stmts.end());
    } else {
      flat.push_back(std::move(s));
    }
  }
  if (flat.empty()) return make_nop();
  if (flat.size() == 1) return flat[0];
  return Stmt(std::make_shared<BlockNode>(std::move(flat)));
}

Stmt EvaluateNode::make(Expr value) {
  check_defined(value, "value", "Evaluate");
  return Stmt(std::make_shared<EvaluateNode>(std::move(value)));
}

Stmt ProducerRealizeNode::make(ProducerRef producer, int value_index, std::vector<Range> bounds, std::string scope,
                               Stmt body) {
  KILN_CHECK(producer, "ProducerRealize of a null producer");
  KILN_CHECK(body.defined(), "ProducerRealize: undefined body");
  return Stmt(std::make_shared<ProducerRealizeNode>(std::move(producer), value_index, std::move(bounds),
                                                    std::move(scope), std::move(body)));
}

Stmt make_nop() { return EvaluateNode::make(IntImmNode::make(Int(32), 0)); }

bool is_nop(const Stmt &s) {
  if (!s.defined()) return true;
  if (const auto *e = s.as<EvaluateNode>()) return e->value.as<IntImmNode>() != nullptr;
  return false;
}

}  // namespace kiln::ir
