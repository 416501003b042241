#include "compiler/ir/ir_printer.h"

#include <cmath>
#include <iomanip>
#include <sstream>

#include "compiler/ir/ir_visitor.h"
#include "compiler/ir/op.h"

namespace kiln::ir {

namespace {

class Printer : public IRVisitor {
 public:
  explicit Printer(std::ostream &os) : os_(os) {}

  void print(const Expr &e) {
    if (!e.defined()) {
      os_ << "(undefined)";
      return;
    }
    visit_expr(e);
  }
  void print(const Stmt &s) {
    if (!s.defined()) return;
    visit_stmt(s);
  }

  void visit(const IntImmNode *op) override {
    if (op->type.is_bool()) {
      os_ << (op->value ? "true" : "false");
    } else if (op->type == Int(32) || op->type == Int(64)) {
      // int64 constants are sizes and offsets (Expr(int64_t)); they read as plain integers too.
      os_ << op->value;
    } else {
      os_ << op->type.to_string() << "(" << op->value << ")";
    }
  }
  void visit(const FloatImmNode *op) override {
    std::ostringstream s;
    if (std::isinf(op->value)) {
      s << (op->value > 0 ? "inf" : "-inf");
    } else if (std::isnan(op->value)) {
      s << "nan";
    } else {
      s << std::setprecision(op->type.bits() == 64 ? 17 : 9) << op->value;
      std::string t = s.str();
      if (t.find_first_of(".eni") == std::string::npos) s << ".0";
    }
    os_ << s.str();
    if (op->type.bits() == 32)
      os_ << "f";
    else if (op->type.bits() == 16)
      os_ << "h";
  }
  void visit(const StringImmNode *op) override { os_ << '"' << op->value << '"'; }
  void visit(const VariableNode *op) override { os_ << op->name; }
  void visit(const CastNode *op) override {
    os_ << op->type.to_string() << "(";
    print(op->value);
    os_ << ")";
  }
  void binary(const Expr &a, const char *sym, const Expr &b) {
    os_ << "(";
    print(a);
    os_ << " " << sym << " ";
    print(b);
    os_ << ")";
  }
  void func(const char *name, const Expr &a, const Expr &b) {
    os_ << name << "(";
    print(a);
    os_ << ", ";
    print(b);
    os_ << ")";
  }
  void visit(const AddNode *op) override { binary(op->a, "+", op->b); }
  void visit(const SubNode *op) override { binary(op->a, "-", op->b); }
  void visit(const MulNode *op) override { binary(op->a, "*", op->b); }
  void visit(const DivNode *op) override { binary(op->a, "/", op->b); }
  void visit(const ModNode *op) override { binary(op->a, "%", op->b); }
  void visit(const FloorDivNode *op) override { func("floordiv", op->a, op->b); }
  void visit(const FloorModNode *op) override { func("floormod", op->a, op->b); }
  void visit(const MinNode *op) override { func("min", op->a, op->b); }
  void visit(const MaxNode *op) override { func("max", op->a, op->b); }
  void visit(const EQNode *op) override { binary(op->a, "==", op->b); }
  void visit(const NENode *op) override { binary(op->a, "!=", op->b); }
  void visit(const LTNode *op) override { binary(op->a, "<", op->b); }
  void visit(const LENode *op) override { binary(op->a, "<=", op->b); }
  void visit(const GTNode *op) override { binary(op->a, ">", op->b); }
  void visit(const GENode *op) override { binary(op->a, ">=", op->b); }
  void visit(const AndNode *op) override { binary(op->a, "&&", op->b); }
  void visit(const OrNode *op) override { binary(op->a, "||", op->b); }
  void visit(const NotNode *op) override {
    os_ << "!";
    print(op->a);
  }
  void visit(const SelectNode *op) override {
    os_ << "select(";
    print(op->condition);
    os_ << ", ";
    print(op->true_value);
    os_ << ", ";
    print(op->false_value);
    os_ << ")";
  }
  void visit(const RampNode *op) override {
    os_ << "ramp(";
    print(op->base);
    os_ << ", ";
    print(op->stride);
    os_ << ", " << op->lanes << ")";
  }
  void visit(const BroadcastNode *op) override {
    os_ << "x" << op->lanes << "(";
    print(op->value);
    os_ << ")";
  }
  void visit(const LetNode *op) override {
    os_ << "(let " << op->var.name() << " = ";
    print(op->value);
    os_ << " in ";
    print(op->body);
    os_ << ")";
  }
  void visit(const CallNode *op) override {
    os_ << op->name << "(";
    for (size_t i = 0; i < op->args.size(); ++i) {
      if (i) os_ << ", ";
      print(op->args[i]);
    }
    os_ << ")";
  }
  void visit(const LoadNode *op) override {
    os_ << op->buffer_var.name() << "[";
    print(op->index);
    os_ << "]";
    if (op->predicate.defined()) {
      os_ << " if ";
      print(op->predicate);
    }
  }
  void visit(const ProducerLoadNode *op) override {
    os_ << producer_output_name(*op->producer, op->value_index);
    os_ << "(";
    for (size_t i = 0; i < op->indices.size(); ++i) {
      if (i) os_ << ", ";
      print(op->indices[i]);
    }
    os_ << ")";
  }
  void visit(const ReduceNode *op) override {
    const auto &c = *op->combiner;
    os_ << "reduce(";
    if (c.lhs.size() == 1) {
      os_ << "(" << c.lhs[0].name() << ", " << c.rhs[0].name() << ") => ";
      print(c.result[0]);
    } else {
      os_ << "comm_reducer#" << op->value_index;
    }
    os_ << ", init ";
    print(c.identity_element[op->value_index]);
    os_ << ", ";
    print(op->source[op->value_index]);
    os_ << ", axis=[";
    for (size_t i = 0; i < op->axis.size(); ++i) {
      if (i) os_ << ", ";
      os_ << op->axis[i];
    }
    os_ << "]";
    if (!is_one(op->condition)) {
      os_ << ", where ";
      print(op->condition);
    }
    os_ << ")";
  }

  // Statements.
  void indent() {
    for (int i = 0; i < indent_; ++i) os_ << "  ";
  }
  void body(const Stmt &s) {
    ++indent_;
    print(s);
    --indent_;
  }
  void visit(const LetStmtNode *op) override {
    indent();
    os_ << "let " << op->var.name() << " = ";
    print(op->value);
    os_ << "\n";
    print(op->body);
  }
  void visit(const AttrStmtNode *op) override {
    indent();
    os_ << "// attr ";
    if (op->node.defined()) {
      os_ << "[";
      print(op->node);
      os_ << "] ";
    }
    os_ << op->key << " = ";
    print(op->value);
    os_ << "\n";
    print(op->body);
  }
  void visit(const AssertStmtNode *op) override {
    indent();
    os_ << "assert(";
    print(op->condition);
    os_ << ", \"" << op->message << "\")\n";
    print(op->body);
  }
  void visit(const StoreNode *op) override {
    indent();
    os_ << op->buffer_var.name() << "[";
    print(op->index);
    os_ << "] = ";
    print(op->value);
    if (op->predicate.defined()) {
      os_ << " if ";
      print(op->predicate);
    }
    os_ << "\n";
  }
  void visit(const ProducerStoreNode *op) override {
    indent();
    os_ << producer_output_name(*op->producer, op->value_index);
    os_ << "(";
    for (size_t i = 0; i < op->indices.size(); ++i) {
      if (i) os_ << ", ";
      print(op->indices[i]);
    }
    os_ << ") = ";
    print(op->value);
    os_ << "\n";
  }
  void visit(const AllocateNode *op) override {
    indent();
    os_ << "allocate " << op->buffer_var.name() << "[" << op->dtype.to_string();
    for (const auto &e : op->extents) {
      os_ << " * ";
      print(e);
    }
    os_ << "], scope " << op->scope << "\n";
    print(op->body);
  }
  void visit(const ForNode *op) override {
    indent();
    os_ << "for (" << op->loop_var.name() << ", ";
    print(op->min);
    os_ << ", ";
    print(op->extent);
    os_ << ")";
    if (op->kind != ForKind::Serial) {
      os_ << " " << (op->kind == ForKind::ThreadBinding ? op->thread_tag : for_kind_name(op->kind));
    }
    os_ << " {\n";
    body(op->body);
    indent();
    os_ << "}\n";
  }
  void visit(const IfThenElseNode *op) override {
    indent();
    os_ << "if (";
    print(op->condition);
    os_ << ") {\n";
    body(op->then_case);
    indent();
    os_ << "}";
    if (op->else_case.defined() && !is_nop(op->else_case)) {
      os_ << " else {\n";
      body(op->else_case);
      indent();
      os_ << "}";
    }
    os_ << "\n";
  }
  void visit(const BlockNode *op) override {
    for (const auto &s : op->stmts) print(s);
  }
  void visit(const EvaluateNode *op) override {
    if (op->value.as<IntImmNode>()) return;  // no-op
    indent();
    print(op->value);
    os_ << "\n";
  }
  void visit(const ProducerRealizeNode *op) override {
    indent();
    os_ << "realize ";
    os_ << producer_output_name(*op->producer, op->value_index);
    os_ << "(";
    for (size_t i = 0; i < op->bounds.size(); ++i) {
      if (i) os_ << ", ";
      os_ << op->bounds[i];
    }
    os_ << ")";
    if (op->scope != "global") os_ << " scope " << op->scope;
    os_ << " {\n";
    body(op->body);
    indent();
    os_ << "}\n";
  }

 private:
  std::ostream &os_;
  int indent_ = 0;
};

}  // namespace

std::ostream &operator<<(std::ostream &os, const Expr &e) {
  Printer(os).print(e);
  return os;
}
std::ostream &operator<<(std::ostream &os, const Stmt &s) {
  Printer(os).print(s);
  return os;
}
std::ostream &operator<<(std::ostream &os, const Range &r) {
  os << "[" << r.min << ", " << r.extent << "]";
  return os;
}
std::ostream &operator<<(std::ostream &os, const IterVar &iv) {
  if (!iv.defined()) return os << "(undefined iter var)";
  os << iv->var.name();
  if (iv->dom.defined()) os << ": " << iv->dom;
  return os;
}

std::string to_string(const Expr &e) {
  std::ostringstream os;
  os << e;
  return os.str();
}
std::string to_string(const Stmt &s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

}  // namespace kiln::ir
