#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "compiler/ir/ir_printer.h"
#include "compiler/ir/ir_visitor.h"
#include "compiler/ir/op.h"
#include "compiler/pass/passes.h"

namespace kiln::pass {

namespace {

using namespace ir;

class Verifier : public IRVisitor {
 public:
  explicit Verifier(const LoweredFunc &f) : func_(f.name) {
    for (const auto &p : f.params) define(p.data);
    for (const auto &v : f.size_vars) {
      if (!defined_.count(v.get())) define(v);
    }
  }

  void visit_stmt(const Stmt &s) override {
    if (!s.defined()) return;
    context_.push_back(&s);
    IRVisitor::visit_stmt(s);
    context_.pop_back();
  }

  using IRVisitor::visit;

  void visit(const VariableNode *op) override {
    if (!defined_.count(op)) fail("variable '", op->name, "' is used outside its definition scope");
  }

#define KILN_VERIFY_BINARY(n)              \
  void visit(const n##Node *op) override { \
    same_types(#n, op->a, op->b);          \
    IRVisitor::visit(op);                  \
  }
  KILN_VERIFY_BINARY(Add)
  KILN_VERIFY_BINARY(Sub)
  KILN_VERIFY_BINARY(Mul)
  KILN_VERIFY_BINARY(Div)
  KILN_VERIFY_BINARY(Mod)
  KILN_VERIFY_BINARY(FloorDiv)
  KILN_VERIFY_BINARY(FloorMod)
  KILN_VERIFY_BINARY(Min)
  KILN_VERIFY_BINARY(Max)
  KILN_VERIFY_BINARY(EQ)
  KILN_VERIFY_BINARY(NE)
  KILN_VERIFY_BINARY(LT)
  KILN_VERIFY_BINARY(LE)
  KILN_VERIFY_BINARY(GT)
  KILN_VERIFY_BINARY(GE)
  KILN_VERIFY_BINARY(And)
  KILN_VERIFY_BINARY(Or)
#undef KILN_VERIFY_BINARY

  void visit(const CastNode *op) override {
    if (op->type.lanes() != op->value.type().lanes()) {
      fail("mismatched lanes in Cast from ", op->value.type().to_string(), " to ", op->type.to_string());
    }
    IRVisitor::visit(op);
  }
  void visit(const SelectNode *op) override {
    same_types("Select", op->true_value, op->false_value);
    lanes_match("Select condition", op->condition, op->true_value.type().lanes());
    IRVisitor::visit(op);
  }
  void visit(const RampNode *op) override {
    if (op->base.type().is_vector() || op->stride.type().is_vector()) fail("Ramp with a vector base or stride");
    IRVisitor::visit(op);
  }
  void visit(const BroadcastNode *op) override {
    if (op->value.type().is_vector()) fail("Broadcast of a vector ", op->value.type().to_string());
    IRVisitor::visit(op);
  }
  void visit(const LetNode *op) override {
    visit_expr(op->value);
    if (op->var.type() != op->value.type()) fail("let '", op->var.name(), "' has a value of another type");
    define(op->var);
    visit_expr(op->body);
    undefine(op->var);
  }
  void visit(const CallNode *op) override {
    if (op->name == intrinsic::kIfThenElse && op->args.size() == 3) {
      same_types("if_then_else", op->args[1], op->args[2]);
      lanes_match("if_then_else condition", op->args[0], op->args[1].type().lanes());
    }
    IRVisitor::visit(op);
  }
  void visit(const LoadNode *op) override {
    buffer(op->buffer_var, "load from");
    if (op->index.type().lanes() != op->type.lanes()) {
      fail("mismatched lanes in load from '", op->buffer_var.name(), "': index ", op->index.type().to_string(),
           ", value ", op->type.to_string());
    }
    if (op->predicate.defined()) lanes_match("load predicate", op->predicate, op->type.lanes());
    IRVisitor::visit(op);
  }
  void visit(const ProducerLoadNode *op) override {
    fail("ProducerLoad of '", op->producer->producer_name(), "' in lowered IR");
  }
  void visit(const ReduceNode *) override { fail("Reduce in lowered IR"); }

  void visit(const LetStmtNode *op) override {
    visit_expr(op->value);
    if (op->var.type() != op->value.type()) fail("let '", op->var.name(), "' has a value of another type");
    define(op->var);
    visit_stmt(op->body);
    undefine(op->var);
  }
  void visit(const AttrStmtNode *op) override {
    const auto *thread = op->node.as<VariableNode>();
    bool binds = thread && (op->key == attr::kThreadExtent || op->key == attr::kVirtualThread);
    visit_expr(op->value);
    if (!binds) {
      visit_stmt(op->body);
      return;
    }
    bool defines = !defined_.count(thread);
    if (defines) define(Var(op->node));
    enter_thread(thread->name, op->value);
    visit_stmt(op->body);
    threads_.pop_back();
    if (defines) undefine(Var(op->node));
  }
  void visit(const StoreNode *op) override {
    buffer(op->buffer_var, "store to");
    if (op->value.type().lanes() != op->index.type().lanes()) {
      fail("mismatched lanes in store to '", op->buffer_var.name(), "': index ", op->index.type().to_string(),
           ", value ", op->value.type().to_string());
    }
    if (op->predicate.defined()) lanes_match("store predicate", op->predicate, op->index.type().lanes());
    IRVisitor::visit(op);
  }
  void visit(const ProducerStoreNode *op) override {
    fail("ProducerStore to '", op->producer->producer_name(), "' in lowered IR");
  }
  void visit(const ProducerRealizeNode *op) override {
    fail("ProducerRealize of '", op->producer->producer_name(), "' in lowered IR");
  }
  void visit(const AllocateNode *op) override {
    for (const auto &e : op->extents) visit_expr(e);
    define(op->buffer_var);
    visit_stmt(op->body);
    undefine(op->buffer_var);
  }
  void visit(const ForNode *op) override {
    visit_expr(op->min);
    visit_expr(op->extent);
    if (op->min.type().is_vector() || op->extent.type().is_vector()) {
      fail("loop over '", op->loop_var.name(), "' has vector bounds");
    }
    if (op->kind == ForKind::ThreadBinding) enter_thread(op->thread_tag, op->extent);
    define(op->loop_var);
    visit_stmt(op->body);
    undefine(op->loop_var);
    if (op->kind == ForKind::ThreadBinding) threads_.pop_back();
  }
  void visit(const IfThenElseNode *op) override {
    if (op->condition.type().is_vector()) fail("if statement with a vector condition");
    IRVisitor::visit(op);
  }

 private:
  template <typename... Args>
  [[noreturn]] void fail(const Args &...args) const {
    std::string where;
    if (!context_.empty()) {
      where = to_string(*context_.back());
      where = "\n  in: " + where.substr(0, where.find('\n'));
    }
    throw InternalError(detail::concat("verify_ir: function '", func_, "': ", args..., where));
  }

  void define(const Var &v) {
    if (!defined_.insert(v.get()).second) fail("variable '", v.name(), "' is defined again inside its own scope");
  }
  void undefine(const Var &v) { defined_.erase(v.get()); }

  void buffer(const Var &v, const char *what) const {
    if (!defined_.count(v.get())) fail(what, " undefined buffer '", v.name(), "'");
  }
  void same_types(const char *node, const Expr &a, const Expr &b) const {
    if (a.type() == b.type()) return;
    const char *what = a.type().lanes() != b.type().lanes() ? "lanes" : "types";
    fail("mismatched ", what, " in ", node, ": ", a.type().to_string(), " and ", b.type().to_string());
  }
  void lanes_match(const char *what, const Expr &e, int lanes) const {
    if (e.type().lanes() != 1 && e.type().lanes() != lanes) {
      fail("mismatched lanes: ", what, " has ", e.type().lanes(), " lanes, the value ", lanes);
    }
  }

  // Threads with one tag are one hardware index: nested bindings must agree on its extent.
  void enter_thread(const std::string &tag, const Expr &extent) {
    for (const auto &[t, e] : threads_) {
      if (t != tag) continue;
      auto a = as_const_int(e), b = as_const_int(extent);
      if (a && b && *a != *b) {
        fail("thread binding '", tag, "' with extent ", *b, " nested in a binding of the same tag with extent ", *a);
      }
    }
    threads_.emplace_back(tag, extent);
  }

  std::string func_;
  std::unordered_set<const VariableNode *> defined_;
  std::vector<std::pair<std::string, Expr>> threads_;
  std::vector<const Stmt *> context_;
};

}  // namespace

void verify_ir(const LoweredFunc &f) {
  Verifier v(f);
  v.visit_stmt(f.body);
}

}  // namespace kiln::pass
