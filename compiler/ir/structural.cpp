#include "compiler/ir/structural.h"

#include <cstring>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kiln::ir {

namespace {

uint64_t float_bits(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
}

// Whether two variables are declared alike, so that one may stand for the other.
bool same_declaration(const VariableNode *a, const VariableNode *b) {
  return a->type == b->type && a->pointee == b->pointee;
}

class Equal {
 public:
  explicit Equal(FreeVars free_vars) : free_vars_(free_vars) {}

  bool expr(const Expr &a, const Expr &b) {
    if (a.same_as(b) && nothing_mapped()) return true;
    if (!a.defined() || !b.defined()) return a.defined() == b.defined();
    if (a->node_type != b->node_type || a.type() != b.type()) return false;
    return expr_node(a, b);
  }

  bool stmt(const Stmt &a, const Stmt &b) {
    if (a.same_as(b) && nothing_mapped()) return true;
    if (!a.defined() || !b.defined()) return a.defined() == b.defined();
    if (a->node_type != b->node_type) return false;
    return stmt_node(a, b);
  }

 private:
  // With no variable in scope mapped to another, a node equals itself.
  bool nothing_mapped() const { return bound_.empty() && free_vars_ == FreeVars::Same; }

  // Puts `a` (of the first tree) and `b` (of the second) in scope as the same variable, until the
  // scope's mark is restored.
  bool bind(const Var &a, const Var &b) {
    if (!same_declaration(a.get(), b.get())) return false;
    bound_.emplace_back(a.get(), b.get());
    return true;
  }

  bool var(const VariableNode *a, const VariableNode *b) {
    // The innermost binding of either variable decides.
    for (auto it = bound_.rbegin(); it != bound_.rend(); ++it) {
      if (it->first == a || it->second == b) return it->first == a && it->second == b;
    }
    if (free_vars_ == FreeVars::Same) return a == b;
    auto fa = free_.find(a);
    if (fa != free_.end()) return fa->second == b;
    if (free_rev_.count(b) || !same_declaration(a, b)) return false;
    free_.emplace(a, b);
    free_rev_.emplace(b, a);
    return true;
  }

  bool exprs(const std::vector<Expr> &a, const std::vector<Expr> &b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!expr(a[i], b[i])) return false;
    }
    return true;
  }

  bool range(const Range &a, const Range &b) { return expr(a.min, b.min) && expr(a.extent, b.extent); }

  template <typename T>
  bool binary(const Expr &a, const Expr &b) {
    const auto *x = a.as<T>(), *y = b.as<T>();
    return expr(x->a, y->a) && expr(x->b, y->b);
  }

  bool combiner(const CommReducer &x, const CommReducer &y) {
    if (!x || !y) return x == y;
    if (x->lhs.size() != y->lhs.size() || !exprs(x->identity_element, y->identity_element)) return false;
    const size_t mark = bound_.size();
    bool eq = true;
    for (size_t i = 0; eq && i < x->lhs.size(); ++i) eq = bind(x->lhs[i], y->lhs[i]) && bind(x->rhs[i], y->rhs[i]);
    eq = eq && exprs(x->result, y->result);
    bound_.resize(mark);
    return eq;
  }

  bool reduce(const ReduceNode *x, const ReduceNode *y) {
    if (x->value_index != y->value_index || x->axis.size() != y->axis.size() || !combiner(x->combiner, y->combiner)) {
      return false;
    }
    const size_t mark = bound_.size();
    bool eq = true;
    for (size_t i = 0; eq && i < x->axis.size(); ++i) {
      const IterVarNode &p = *x->axis[i].get(), &q = *y->axis[i].get();
      eq = p.iter_type == q.iter_type && p.thread_tag == q.thread_tag && range(p.dom, q.dom) && bind(p.var, q.var);
    }
    eq = eq && exprs(x->source, y->source) && expr(x->condition, y->condition);
    bound_.resize(mark);
    return eq;
  }

  bool expr_node(const Expr &a, const Expr &b) {
    switch (a->node_type) {
      case NodeType::IntImm:
        return a.as<IntImmNode>()->value == b.as<IntImmNode>()->value;
      case NodeType::FloatImm:
        return float_bits(a.as<FloatImmNode>()->value) == float_bits(b.as<FloatImmNode>()->value);
      case NodeType::StringImm:
        return a.as<StringImmNode>()->value == b.as<StringImmNode>()->value;
      case NodeType::Variable:
        return var(a.as<VariableNode>(), b.as<VariableNode>());
      case NodeType::Cast:
        return expr(a.as<CastNode>()->value, b.as<CastNode>()->value);
#define KILN_BINARY_CASE(n) \
  case NodeType::n:         \
    return binary<n##Node>(a, b);
        KILN_BINARY_NODES(KILN_BINARY_CASE)
#undef KILN_BINARY_CASE
      case NodeType::Not:
        return expr(a.as<NotNode>()->a, b.as<NotNode>()->a);
      case NodeType::Select: {
        const auto *x = a.as<SelectNode>(), *y = b.as<SelectNode>();
        return expr(x->condition, y->condition) && expr(x->true_value, y->true_value) &&
               expr(x->false_value, y->false_value);
      }
      case NodeType::Ramp: {
        const auto *x = a.as<RampNode>(), *y = b.as<RampNode>();
        return x->lanes == y->lanes && expr(x->base, y->base) && expr(x->stride, y->stride);
      }
      case NodeType::Broadcast: {
        const auto *x = a.as<BroadcastNode>(), *y = b.as<BroadcastNode>();
        return x->lanes == y->lanes && expr(x->value, y->value);
      }
      case NodeType::Let: {
        const auto *x = a.as<LetNode>(), *y = b.as<LetNode>();
        if (!expr(x->value, y->value)) return false;
        const size_t mark = bound_.size();
        const bool eq = bind(x->var, y->var) && expr(x->body, y->body);
        bound_.resize(mark);
        return eq;
      }
      case NodeType::Call: {
        const auto *x = a.as<CallNode>(), *y = b.as<CallNode>();
        return x->name == y->name && x->kind == y->kind && exprs(x->args, y->args);
      }
      case NodeType::Load: {
        const auto *x = a.as<LoadNode>(), *y = b.as<LoadNode>();
        return var(x->buffer_var.get(), y->buffer_var.get()) && expr(x->index, y->index) &&
               expr(x->predicate, y->predicate);
      }
      case NodeType::ProducerLoad: {
        const auto *x = a.as<ProducerLoadNode>(), *y = b.as<ProducerLoadNode>();
        return x->producer == y->producer && x->value_index == y->value_index && exprs(x->indices, y->indices);
      }
      case NodeType::Reduce:
        return reduce(a.as<ReduceNode>(), b.as<ReduceNode>());
#define KILN_STMT_CASE(n) case NodeType::n:
        KILN_STMT_NODES(KILN_STMT_CASE)
#undef KILN_STMT_CASE
        break;  // an Expr never holds a statement node
    }
    return false;
  }

  bool stmt_node(const Stmt &a, const Stmt &b) {
    switch (a->node_type) {
      case NodeType::LetStmt: {
        const auto *x = a.as<LetStmtNode>(), *y = b.as<LetStmtNode>();
        if (!expr(x->value, y->value)) return false;
        const size_t mark = bound_.size();
        const bool eq = bind(x->var, y->var) && stmt(x->body, y->body);
        bound_.resize(mark);
        return eq;
      }
      case NodeType::AttrStmt: {
        const auto *x = a.as<AttrStmtNode>(), *y = b.as<AttrStmtNode>();
        return x->key == y->key && expr(x->node, y->node) && expr(x->value, y->value) && stmt(x->body, y->body);
      }
      case NodeType::AssertStmt: {
        const auto *x = a.as<AssertStmtNode>(), *y = b.as<AssertStmtNode>();
        return x->message == y->message && expr(x->condition, y->condition) && stmt(x->body, y->body);
      }
      case NodeType::Store: {
        const auto *x = a.as<StoreNode>(), *y = b.as<StoreNode>();
        return var(x->buffer_var.get(), y->buffer_var.get()) && expr(x->value, y->value) && expr(x->index, y->index) &&
               expr(x->predicate, y->predicate);
      }
      case NodeType::ProducerStore: {
        const auto *x = a.as<ProducerStoreNode>(), *y = b.as<ProducerStoreNode>();
        return x->producer == y->producer && x->value_index == y->value_index && expr(x->value, y->value) &&
               exprs(x->indices, y->indices);
      }
      case NodeType::Allocate: {
        const auto *x = a.as<AllocateNode>(), *y = b.as<AllocateNode>();
        if (x->dtype != y->dtype || x->scope != y->scope || !exprs(x->extents, y->extents)) return false;
        const size_t mark = bound_.size();
        const bool eq = bind(x->buffer_var, y->buffer_var) && stmt(x->body, y->body);
        bound_.resize(mark);
        return eq;
      }
      case NodeType::For: {
        const auto *x = a.as<ForNode>(), *y = b.as<ForNode>();
        if (x->kind != y->kind || x->thread_tag != y->thread_tag || !expr(x->min, y->min) ||
            !expr(x->extent, y->extent)) {
          return false;
        }
        const size_t mark = bound_.size();
        const bool eq = bind(x->loop_var, y->loop_var) && stmt(x->body, y->body);
        bound_.resize(mark);
        return eq;
      }
      case NodeType::IfThenElse: {
        const auto *x = a.as<IfThenElseNode>(), *y = b.as<IfThenElseNode>();
        return expr(x->condition, y->condition) && stmt(x->then_case, y->then_case) && stmt(x->else_case, y->else_case);
      }
      case NodeType::Block: {
        const auto *x = a.as<BlockNode>(), *y = b.as<BlockNode>();
        if (x->stmts.size() != y->stmts.size()) return false;
        for (size_t i = 0; i < x->stmts.size(); ++i) {
          if (!stmt(x->stmts[i], y->stmts[i])) return false;
        }
        return true;
      }
      case NodeType::Evaluate:
        return expr(a.as<EvaluateNode>()->value, b.as<EvaluateNode>()->value);
      case NodeType::ProducerRealize: {
        const auto *x = a.as<ProducerRealizeNode>(), *y = b.as<ProducerRealizeNode>();
        if (x->producer != y->producer || x->value_index != y->value_index || x->scope != y->scope ||
            x->bounds.size() != y->bounds.size()) {
          return false;
        }
        for (size_t i = 0; i < x->bounds.size(); ++i) {
          if (!range(x->bounds[i], y->bounds[i])) return false;
        }
        return stmt(x->body, y->body);
      }
#define KILN_EXPR_CASE(n) case NodeType::n:
        KILN_EXPR_NODES(KILN_EXPR_CASE)
#undef KILN_EXPR_CASE
        break;  // a Stmt never holds an expression node
    }
    return false;
  }

  const FreeVars free_vars_;
  // Variables in scope, innermost last: (variable of the first tree, variable of the second).
  std::vector<std::pair<const VariableNode *, const VariableNode *>> bound_;
  // FreeVars::Mapped: the free variables matched so far, both ways.
  std::unordered_map<const VariableNode *, const VariableNode *> free_, free_rev_;
};

inline size_t mix(size_t h, size_t v) { return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)); }

size_t hash_type(DataType t) {
  return mix(mix(static_cast<size_t>(t.code()), static_cast<size_t>(t.bits())), static_cast<size_t>(t.lanes()));
}

size_t hash_string(const std::string &s) { return std::hash<std::string>()(s); }

// Hashes what Equal compares. A variable bound in the tree hashes as the number of binders met
// before it, so that trees equal up to the choice of bound variables hash alike; with
// FreeVars::Mapped the free variables are numbered the same way at their first occurrence.
class Hasher {
 public:
  explicit Hasher(FreeVars free_vars) : free_vars_(free_vars) {}

  size_t expr(const Expr &e) {
    if (!e.defined()) return 0x5bd1e995;
    size_t h = mix(static_cast<size_t>(e->node_type), hash_type(e.type()));
    switch (e->node_type) {
      case NodeType::IntImm:
        return mix(h, static_cast<size_t>(e.as<IntImmNode>()->value));
      case NodeType::FloatImm:
        return mix(h, static_cast<size_t>(float_bits(e.as<FloatImmNode>()->value)));
      case NodeType::StringImm:
        return mix(h, hash_string(e.as<StringImmNode>()->value));
      case NodeType::Variable:
        return mix(h, var(e.as<VariableNode>()));
      case NodeType::Cast:
        return mix(h, expr(e.as<CastNode>()->value));
#define KILN_BINARY_CASE(n)                     \
  case NodeType::n: {                           \
    const auto *x = e.as<n##Node>();            \
    return mix(mix(h, expr(x->a)), expr(x->b)); \
  }
        KILN_BINARY_NODES(KILN_BINARY_CASE)
#undef KILN_BINARY_CASE
      case NodeType::Not:
        return mix(h, expr(e.as<NotNode>()->a));
      case NodeType::Select: {
        const auto *x = e.as<SelectNode>();
        return mix(mix(mix(h, expr(x->condition)), expr(x->true_value)), expr(x->false_value));
      }
      case NodeType::Ramp: {
        const auto *x = e.as<RampNode>();
        return mix(mix(mix(h, static_cast<size_t>(x->lanes)), expr(x->base)), expr(x->stride));
      }
      case NodeType::Broadcast: {
        const auto *x = e.as<BroadcastNode>();
        return mix(mix(h, static_cast<size_t>(x->lanes)), expr(x->value));
      }
      case NodeType::Let: {
        const auto *x = e.as<LetNode>();
        h = mix(h, expr(x->value));
        const size_t mark = bound_.size();
        bind(x->var);
        h = mix(h, expr(x->body));
        bound_.resize(mark);
        return h;
      }
      case NodeType::Call: {
        const auto *x = e.as<CallNode>();
        h = mix(mix(h, hash_string(x->name)), static_cast<size_t>(x->kind));
        return exprs(h, x->args);
      }
      case NodeType::Load: {
        const auto *x = e.as<LoadNode>();
        return mix(mix(mix(h, var(x->buffer_var.get())), expr(x->index)), expr(x->predicate));
      }
      case NodeType::ProducerLoad: {
        const auto *x = e.as<ProducerLoadNode>();
        h = mix(mix(h, std::hash<const void *>()(x->producer.get())), static_cast<size_t>(x->value_index));
        return exprs(h, x->indices);
      }
      case NodeType::Reduce:
        return reduce(h, e.as<ReduceNode>());
#define KILN_STMT_CASE(n) case NodeType::n:
        KILN_STMT_NODES(KILN_STMT_CASE)
#undef KILN_STMT_CASE
        break;  // an Expr never holds a statement node
    }
    return h;
  }

  size_t stmt(const Stmt &s) {
    if (!s.defined()) return 0x27d4eb2d;
    size_t h = static_cast<size_t>(s->node_type) * 0x100000001b3ULL;
    switch (s->node_type) {
      case NodeType::LetStmt: {
        const auto *x = s.as<LetStmtNode>();
        h = mix(h, expr(x->value));
        const size_t mark = bound_.size();
        bind(x->var);
        h = mix(h, stmt(x->body));
        bound_.resize(mark);
        return h;
      }
      case NodeType::AttrStmt: {
        const auto *x = s.as<AttrStmtNode>();
        return mix(mix(mix(mix(h, hash_string(x->key)), expr(x->node)), expr(x->value)), stmt(x->body));
      }
      case NodeType::AssertStmt: {
        const auto *x = s.as<AssertStmtNode>();
        return mix(mix(mix(h, hash_string(x->message)), expr(x->condition)), stmt(x->body));
      }
      case NodeType::Store: {
        const auto *x = s.as<StoreNode>();
        return mix(mix(mix(mix(h, var(x->buffer_var.get())), expr(x->value)), expr(x->index)), expr(x->predicate));
      }
      case NodeType::ProducerStore: {
        const auto *x = s.as<ProducerStoreNode>();
        h = mix(mix(h, std::hash<const void *>()(x->producer.get())), static_cast<size_t>(x->value_index));
        return exprs(mix(h, expr(x->value)), x->indices);
      }
      case NodeType::Allocate: {
        const auto *x = s.as<AllocateNode>();
        h = exprs(mix(mix(h, hash_type(x->dtype)), hash_string(x->scope)), x->extents);
        const size_t mark = bound_.size();
        bind(x->buffer_var);
        h = mix(h, stmt(x->body));
        bound_.resize(mark);
        return h;
      }
      case NodeType::For: {
        const auto *x = s.as<ForNode>();
        h = mix(mix(h, static_cast<size_t>(x->kind)), hash_string(x->thread_tag));
        h = mix(mix(h, expr(x->min)), expr(x->extent));
        const size_t mark = bound_.size();
        bind(x->loop_var);
        h = mix(h, stmt(x->body));
        bound_.resize(mark);
        return h;
      }
      case NodeType::IfThenElse: {
        const auto *x = s.as<IfThenElseNode>();
        return mix(mix(mix(h, expr(x->condition)), stmt(x->then_case)), stmt(x->else_case));
      }
      case NodeType::Block:
        for (const auto &c : s.as<BlockNode>()->stmts) h = mix(h, stmt(c));
        return h;
      case NodeType::Evaluate:
        return mix(h, expr(s.as<EvaluateNode>()->value));
      case NodeType::ProducerRealize: {
        const auto *x = s.as<ProducerRealizeNode>();
        h = mix(mix(h, std::hash<const void *>()(x->producer.get())), static_cast<size_t>(x->value_index));
        h = mix(h, hash_string(x->scope));
        for (const auto &r : x->bounds) h = mix(mix(h, expr(r.min)), expr(r.extent));
        return mix(h, stmt(x->body));
      }
#define KILN_EXPR_CASE(n) case NodeType::n:
        KILN_EXPR_NODES(KILN_EXPR_CASE)
#undef KILN_EXPR_CASE
        break;  // a Stmt never holds an expression node
    }
    return h;
  }

 private:
  void bind(const Var &v) { bound_.emplace_back(v.get(), next_++); }

  size_t var(const VariableNode *v) {
    for (auto it = bound_.rbegin(); it != bound_.rend(); ++it) {
      if (it->first == v) return it->second * 31 + 7;
    }
    if (free_vars_ == FreeVars::Same) return std::hash<const void *>()(v);
    const auto [it, inserted] = free_.try_emplace(v, next_);
    if (inserted) ++next_;
    return it->second * 31 + 7;
  }

  size_t exprs(size_t h, const std::vector<Expr> &es) {
    for (const auto &e : es) h = mix(h, expr(e));
    return h;
  }

  size_t reduce(size_t h, const ReduceNode *x) {
    h = mix(h, static_cast<size_t>(x->value_index));
    const size_t mark = bound_.size();
    if (const CommReducer &c = x->combiner) {
      h = exprs(h, c->identity_element);
      for (size_t i = 0; i < c->lhs.size(); ++i) {
        bind(c->lhs[i]);
        bind(c->rhs[i]);
      }
      h = exprs(h, c->result);
      bound_.resize(mark);
    }
    for (const auto &iv : x->axis) {
      h = mix(mix(h, static_cast<size_t>(iv->iter_type)), hash_string(iv->thread_tag));
      h = mix(mix(h, expr(iv->dom.min)), expr(iv->dom.extent));
      bind(iv->var);
    }
    h = mix(exprs(h, x->source), expr(x->condition));
    bound_.resize(mark);
    return h;
  }

  const FreeVars free_vars_;
  // Variables in scope, innermost last, with their numbers.
  std::vector<std::pair<const VariableNode *, size_t>> bound_;
  // FreeVars::Mapped: the numbers of the free variables met so far.
  std::unordered_map<const VariableNode *, size_t> free_;
  size_t next_ = 1;
};

}  // namespace

bool structural_equal(const Expr &a, const Expr &b, FreeVars free_vars) { return Equal(free_vars).expr(a, b); }
bool structural_equal(const Stmt &a, const Stmt &b, FreeVars free_vars) { return Equal(free_vars).stmt(a, b); }
size_t structural_hash(const Expr &e, FreeVars free_vars) { return Hasher(free_vars).expr(e); }
size_t structural_hash(const Stmt &s, FreeVars free_vars) { return Hasher(free_vars).stmt(s); }

}  // namespace kiln::ir
