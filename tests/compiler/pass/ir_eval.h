#pragma once
// A small reference evaluator of flattened IR for pass tests: it runs a statement over buffers
// (vectors of doubles, integers held exactly) so that a pass's output can be checked to compute
// what its input computed. Out-of-bounds accesses on active lanes throw std::out_of_range.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "compiler/ir/ir.h"
#include "compiler/ir/op.h"

namespace kiln::ir::testing {

class Evaluator {
 public:
  using Value = std::vector<double>;  // one entry per lane

  std::unordered_map<const VariableNode *, std::vector<double>> buffers;
  int64_t stores = 0;  // number of lane writes

  void set(const Var &v, double value) { vars_[v.get()] = {value}; }
  std::vector<double> &buffer(const Var &v, size_t size = 0) {
    auto &b = buffers[v.get()];
    if (size) b.assign(size, 0.0);
    return b;
  }

  void run(const Stmt &s) {
    if (!s.defined()) return;
    if (const auto *op = s.as<ForNode>()) {
      int64_t min = scalar(op->min), extent = scalar(op->extent);
      auto saved = vars_.find(op->loop_var.get()) != vars_.end() ? vars_[op->loop_var.get()] : Value();
      for (int64_t i = min; i < min + extent; ++i) {
        vars_[op->loop_var.get()] = {static_cast<double>(i)};
        run(op->body);
      }
      restore(op->loop_var, saved);
    } else if (const auto *op = s.as<LetStmtNode>()) {
      auto saved = vars_.count(op->var.get()) ? vars_[op->var.get()] : Value();
      vars_[op->var.get()] = eval(op->value);
      run(op->body);
      restore(op->var, saved);
    } else if (const auto *op = s.as<BlockNode>()) {
      for (const auto &c : op->stmts) run(c);
    } else if (const auto *op = s.as<IfThenElseNode>()) {
      Value c = eval(op->condition);
      if (c.size() != 1) throw std::logic_error("if with a vector condition");
      run(c[0] != 0 ? op->then_case : op->else_case);
    } else if (const auto *op = s.as<StoreNode>()) {
      Value v = eval(op->value), i = eval(op->index);
      Value p = op->predicate.defined() ? eval(op->predicate) : Value(i.size(), 1.0);
      auto &buf = find(op->buffer_var);
      if (v.size() != i.size() || p.size() != i.size()) throw std::logic_error("store lanes differ");
      for (size_t l = 0; l < i.size(); ++l) {
        if (p[l] == 0) continue;
        buf.at(index(i[l], buf, op->buffer_var)) = v[l];
        ++stores;
      }
    } else if (const auto *op = s.as<AllocateNode>()) {
      int64_t n = 1;
      for (const auto &e : op->extents) n *= scalar(e);
      buffers[op->buffer_var.get()].assign(static_cast<size_t>(n), -777.0);
      run(op->body);
      buffers.erase(op->buffer_var.get());
    } else if (const auto *op = s.as<AttrStmtNode>()) {
      run(op->body);
    } else if (const auto *op = s.as<AssertStmtNode>()) {
      run(op->body);
    } else if (const auto *op = s.as<EvaluateNode>()) {
      eval(op->value);
    } else {
      throw std::logic_error(std::string("cannot evaluate ") + node_type_name(s->node_type));
    }
  }

  Value eval(const Expr &e) {
    const DataType t = e.type();
    if (const auto *op = e.as<IntImmNode>()) return {static_cast<double>(op->value)};
    if (const auto *op = e.as<FloatImmNode>()) return {op->value};
    if (const auto *op = e.as<VariableNode>()) {
      auto it = vars_.find(op);
      if (it == vars_.end()) throw std::logic_error("unbound variable " + op->name);
      return it->second;
    }
    if (const auto *op = e.as<CastNode>()) {
      Value v = eval(op->value);
      for (auto &x : v) x = t.is_bool() ? (x != 0) : t.is_float() ? x : std::trunc(x);
      return v;
    }
    if (const auto *op = e.as<RampNode>()) {
      double b = eval(op->base)[0], s = eval(op->stride)[0];
      Value v(op->lanes);
      for (int l = 0; l < op->lanes; ++l) v[l] = b + l * s;
      return v;
    }
    if (const auto *op = e.as<BroadcastNode>()) return Value(op->lanes, eval(op->value)[0]);
    if (const auto *op = e.as<NotNode>()) {
      Value v = eval(op->a);
      for (auto &x : v) x = x == 0;
      return v;
    }
    if (const auto *op = e.as<SelectNode>()) {
      Value c = widen(eval(op->condition), t.lanes()), a = eval(op->true_value), b = eval(op->false_value);
      for (size_t l = 0; l < a.size(); ++l) a[l] = c[l] != 0 ? a[l] : b[l];
      return a;
    }
    if (const auto *op = e.as<LetNode>()) {
      auto saved = vars_.count(op->var.get()) ? vars_[op->var.get()] : Value();
      vars_[op->var.get()] = eval(op->value);
      Value r = eval(op->body);
      restore(op->var, saved);
      return r;
    }
    if (const auto *op = e.as<CallNode>()) {
      if (op->name == intrinsic::kLikely) return eval(op->args[0]);
      if (op->name == intrinsic::kIfThenElse) {
        Value c = eval(op->args[0]);
        if (c.size() == 1 && t.lanes() == 1) return eval(c[0] != 0 ? op->args[1] : op->args[2]);
        c = widen(c, t.lanes());
        Value a = eval(op->args[1]), b = eval(op->args[2]);
        for (size_t l = 0; l < a.size(); ++l) a[l] = c[l] != 0 ? a[l] : b[l];
        return a;
      }
      if (op->name == "exp") {
        Value v = eval(op->args[0]);
        for (auto &x : v) x = std::exp(x);
        return v;
      }
      if (op->name == "sync_threads") return {0.0};
      throw std::logic_error("cannot evaluate call " + op->name);
    }
    if (const auto *op = e.as<LoadNode>()) {
      Value i = eval(op->index);
      Value p = op->predicate.defined() ? eval(op->predicate) : Value(i.size(), 1.0);
      auto &buf = find(op->buffer_var);
      Value v(i.size(), 0.0);
      for (size_t l = 0; l < i.size(); ++l) {
        if (p[l] != 0) v[l] = buf.at(index(i[l], buf, op->buffer_var));
      }
      return v;
    }
    return binary(e);
  }

 private:
  std::unordered_map<const VariableNode *, Value> vars_;

  void restore(const Var &v, const Value &saved) {
    if (saved.empty()) vars_.erase(v.get());
    else vars_[v.get()] = saved;
  }
  int64_t scalar(const Expr &e) {
    Value v = eval(e);
    if (v.size() != 1) throw std::logic_error("expected a scalar");
    return static_cast<int64_t>(v[0]);
  }
  static Value widen(Value v, int lanes) { return v.size() == 1 ? Value(lanes, v[0]) : v; }
  std::vector<double> &find(const Var &v) {
    auto it = buffers.find(v.get());
    if (it == buffers.end()) throw std::logic_error("unknown buffer " + v.name());
    return it->second;
  }
  static size_t index(double i, const std::vector<double> &buf, const Var &v) {
    if (i < 0 || i >= static_cast<double>(buf.size())) {
      throw std::out_of_range(v.name() + "[" + std::to_string(static_cast<int64_t>(i)) + "]");
    }
    return static_cast<size_t>(i);
  }

  template <typename T>
  bool bin(const Expr &e, Value *a, Value *b) {
    const T *op = e.as<T>();
    if (!op) return false;
    *a = eval(op->a);
    *b = eval(op->b);
    if (a->size() != b->size()) throw std::logic_error("binary operands with different lanes");
    return true;
  }

  Value binary(const Expr &e) {
    Value a, b;
    const bool is_int = e.type().is_integer_like();
    auto apply = [&](auto f) {
      Value r(a.size());
      for (size_t l = 0; l < a.size(); ++l) r[l] = f(a[l], b[l]);
      return r;
    };
    auto idiv = [](double x, double y) {
      if (y == 0) throw std::domain_error("division by zero");
      return std::trunc(x / y);
    };
    if (bin<AddNode>(e, &a, &b)) return apply([](double x, double y) { return x + y; });
    if (bin<SubNode>(e, &a, &b)) return apply([](double x, double y) { return x - y; });
    if (bin<MulNode>(e, &a, &b)) return apply([](double x, double y) { return x * y; });
    if (bin<DivNode>(e, &a, &b)) return apply([&](double x, double y) { return is_int ? idiv(x, y) : x / y; });
    if (bin<ModNode>(e, &a, &b)) return apply([&](double x, double y) { return x - idiv(x, y) * y; });
    if (bin<FloorDivNode>(e, &a, &b)) {
      return apply([&](double x, double y) { return y == 0 ? idiv(x, y) : std::floor(x / y); });
    }
    if (bin<FloorModNode>(e, &a, &b)) {
      return apply([&](double x, double y) { return x - (y == 0 ? idiv(x, y) : std::floor(x / y)) * y; });
    }
    if (bin<MinNode>(e, &a, &b)) return apply([](double x, double y) { return std::min(x, y); });
    if (bin<MaxNode>(e, &a, &b)) return apply([](double x, double y) { return std::max(x, y); });
    if (bin<EQNode>(e, &a, &b)) return apply([](double x, double y) { return double(x == y); });
    if (bin<NENode>(e, &a, &b)) return apply([](double x, double y) { return double(x != y); });
    if (bin<LTNode>(e, &a, &b)) return apply([](double x, double y) { return double(x < y); });
    if (bin<LENode>(e, &a, &b)) return apply([](double x, double y) { return double(x <= y); });
    if (bin<GTNode>(e, &a, &b)) return apply([](double x, double y) { return double(x > y); });
    if (bin<GENode>(e, &a, &b)) return apply([](double x, double y) { return double(x >= y); });
    if (bin<AndNode>(e, &a, &b)) return apply([](double x, double y) { return double(x != 0 && y != 0); });
    if (bin<OrNode>(e, &a, &b)) return apply([](double x, double y) { return double(x != 0 || y != 0); });
    throw std::logic_error(std::string("cannot evaluate ") + node_type_name(e->node_type));
  }
};

}  // namespace kiln::ir::testing
