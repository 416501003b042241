#include "compiler/ir/structural.h"

#include <cstring>
#include <functional>
#include <unordered_map>


namespace kiln::ir {

namespace {

class Equal {
 public:
  explicit Equal(bool map_free) : map_free_(map_free) {}

  bool eq(const Expr &a, const Expr &b) {
    if (a.same_as(b) && map_.empty() && !map_free_) return true;
    if (!a.defined() || !b.defined()) return a.defined() == b.defined();
    if (a->node_type != b->node_type || a.type() != b.type()) return false;
    return eq_node(a, b);
  }

  bool eq(const Stmt &a, const Stmt &b) {
    if (!a.defined() || !b.defined()) return a.defined() == b.defined();
    if (a->node_type != b->node_type) return false;
    return eq_stmt(a, b);
  }

 private:
  bool def(const Var &a, const Var &b) {
    if (a.type() != b.type()) return false;
    map_[a.get()] = b.get();
    rev_[b.get()] = a.get();
    return true;
  }

  bool var(const VariableNode *a, const VariableNode *b) {
    auto it = map_.find(a);
    if (it != map_.end()) return it->second == b;
    auto rit = rev_.find(b);
    if (rit != rev_.end()) return rit->second == a;
    if (a != b && !map_free_) return false;
    map_[a] = b;
    rev_[b] = a;
    return true;
  }

  bool eq_exprs(const std::vector<Expr> &a, const std::vector<Expr> &b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!eq(a[i], b[i])) return false;
    }
    return true;
  }

  template <typename T>
  bool bin(const Expr &a, const Expr &b) {
    const auto *x = a.as<T>(), *y = b.as<T>();
    return eq(x->a, y->a) && eq(x->b, y->b);
  }

  bool eq_node(const Expr &a, const Expr &b) {
    switch (a->node_type) {
      case NodeType::IntImm: return a.as<IntImmNode>()->value == b.as<IntImmNode>()->value;
      case NodeType::FloatImm: {
        double x = a.as<FloatImmNode>()->value, y = b.as<FloatImmNode>()->value;
        return std::memcmp(&x, &y, sizeof x) == 0;
      }
      case NodeType::StringImm: return a.as<StringImmNode>()->value == b.as<StringImmNode>()->value;
      case NodeType::Variable: return var(a.as<VariableNode>(), b.as<VariableNode>());
      case NodeType::Cast: return eq(a.as<CastNode>()->value, b.as<CastNode>()->value);
      case NodeType::Add: return bin<AddNode>(a, b);
      case NodeType::Sub: return bin<SubNode>(a, b);
      case NodeType::Mul: return bin<MulNode>(a, b);
      case NodeType::Div: return bin<DivNode>(a, b);
      case NodeType::Mod: return bin<ModNode>(a, b);
      case NodeType::FloorDiv: return bin<FloorDivNode>(a, b);
      case NodeType::FloorMod: return bin<FloorModNode>(a, b);
      case NodeType::Min: return bin<MinNode>(a, b);
      case NodeType::Max: return bin<MaxNode>(a, b);
      case NodeType::EQ: return bin<EQNode>(a, b);
      case NodeType::NE: return bin<NENode>(a, b);
      case NodeType::LT: return bin<LTNode>(a, b);
      case NodeType::LE: return bin<LENode>(a, b);
      case NodeType::GT: return bin<GTNode>(a, b);
      case NodeType::GE: return bin<GENode>(a, b);
      case NodeType::And: return bin<AndNode>(a, b);
      case NodeType::Or: return bin<OrNode>(a, b);
      case NodeType::Not: return eq(a.as<NotNode>()->a, b.as<NotNode>()->a);
      case NodeType::Select: {
        const auto *x = a.as<SelectNode>(), *y = b.as<SelectNode>();
        return eq(x->condition, y->condition) && eq(x->true_value, y->true_value) && eq(x->false_value, y->false_value);
      }
      case NodeType::Ramp: {
        const auto *x = a.as<RampNode>(), *y = b.as<RampNode>();
        return x->lanes == y->lanes && eq(x->base, y->base) && eq(x->stride, y->stride);
      }
      case NodeType::Broadcast: {
        const auto *x = a.as<BroadcastNode>(), *y = b.as<BroadcastNode>();
        return x->lanes == y->lanes && eq(x->value, y->value);
      }
      case NodeType::Let: {
        const auto *x = a.as<LetNode>(), *y = b.as<LetNode>();
        return eq(x->value, y->value) && def(x->var, y->var) && eq(x->body, y->body);
      }
      case NodeType::Call: {
        const auto *x = a.as<CallNode>(), *y = b.as<CallNode>();
        return x->name == y->name && x->kind == y->kind && eq_exprs(x->args, y->args);
      }
      case NodeType::Load: {
        const auto *x = a.as<LoadNode>(), *y = b.as<LoadNode>();
        return var(x->buffer_var.get(), y->buffer_var.get()) && eq(x->index, y->index) && eq(x->predicate, y->predicate);
      }
      case NodeType::ProducerLoad: {
        const auto *x = a.as<ProducerLoadNode>(), *y = b.as<ProducerLoadNode>();
        return x->producer == y->producer && x->value_index == y->value_index && eq_exprs(x->indices, y->indices);
      }
      case NodeType::Reduce: {
        const auto *x = a.as<ReduceNode>(), *y = b.as<ReduceNode>();
        if (x->combiner != y->combiner || x->value_index != y->value_index || x->axis.size() != y->axis.size()) {
          return false;
        }
        for (size_t i = 0; i < x->axis.size(); ++i) {
          if (!eq(x->axis[i]->dom.min, y->axis[i]->dom.min) || !eq(x->axis[i]->dom.extent, y->axis[i]->dom.extent) ||
              !def(x->axis[i]->var, y->axis[i]->var)) {
            return false;
          }
        }
        return eq_exprs(x->source, y->source) && eq(x->condition, y->condition);
      }
      default: return false;
    }
  }

  bool eq_stmt(const Stmt &a, const Stmt &b) {
    switch (a->node_type) {
      case NodeType::LetStmt: {
        const auto *x = a.as<LetStmtNode>(), *y = b.as<LetStmtNode>();
        return eq(x->value, y->value) && def(x->var, y->var) && eq(x->body, y->body);
      }
      case NodeType::AttrStmt: {
        const auto *x = a.as<AttrStmtNode>(), *y = b.as<AttrStmtNode>();
        return x->key == y->key && eq(x->node, y->node) && eq(x->value, y->value) && eq(x->body, y->body);
      }
      case NodeType::AssertStmt: {
        const auto *x = a.as<AssertStmtNode>(), *y = b.as<AssertStmtNode>();
        return x->message == y->message && eq(x->condition, y->condition) && eq(x->body, y->body);
      }
      case NodeType::Store: {
        const auto *x = a.as<StoreNode>(), *y = b.as<StoreNode>();
        return var(x->buffer_var.get(), y->buffer_var.get()) && eq(x->value, y->value) && eq(x->index, y->index) &&
               eq(x->predicate, y->predicate);
      }
      case NodeType::ProducerStore: {
        const auto *x = a.as<ProducerStoreNode>(), *y = b.as<ProducerStoreNode>();
        return x->producer == y->producer && x->value_index == y->value_index && eq(x->value, y->value) &&
               eq_exprs(x->indices, y->indices);
      }
      case NodeType::Allocate: {
        const auto *x = a.as<AllocateNode>(), *y = b.as<AllocateNode>();
        return x->dtype == y->dtype && x->scope == y->scope && eq_exprs(x->extents, y->extents) &&
               def(x->buffer_var, y->buffer_var) && eq(x->body, y->body);
      }
      case NodeType::For: {
        const auto *x = a.as<ForNode>(), *y = b.as<ForNode>();
        return x->kind == y->kind && x->thread_tag == y->thread_tag && eq(x->min, y->min) && eq(x->extent, y->extent) &&
               def(x->loop_var, y->loop_var) && eq(x->body, y->body);
      }
      case NodeType::IfThenElse: {
        const auto *x = a.as<IfThenElseNode>(), *y = b.as<IfThenElseNode>();
        return eq(x->condition, y->condition) && eq(x->then_case, y->then_case) && eq(x->else_case, y->else_case);
      }
      case NodeType::Block: {
        const auto *x = a.as<BlockNode>(), *y = b.as<BlockNode>();
        if (x->stmts.size() != y->stmts.size()) return false;
        for (size_t i = 0; i < x->stmts.size(); ++i) {
          if (!eq(x->stmts[i], y->stmts[i])) return false;
        }
        return true;
      }
      case NodeType::Evaluate: return eq(a.as<EvaluateNode>()->value, b.as<EvaluateNode>()->value);
      case NodeType::ProducerRealize: {
        const auto *x = a.as<ProducerRealizeNode>(), *y = b.as<ProducerRealizeNode>();
        if (x->producer != y->producer || x->value_index != y->value_index || x->scope != y->scope ||
            x->bounds.size() != y->bounds.size()) {
          return false;
        }
        for (size_t i = 0; i < x->bounds.size(); ++i) {
          if (!eq(x->bounds[i].min, y->bounds[i].min) || !eq(x->bounds[i].extent, y->bounds[i].extent)) return false;
        }
        return eq(x->body, y->body);
      }
      default: return false;
    }
  }

  bool map_free_;
  std::unordered_map<const VariableNode *, const VariableNode *> map_, rev_;
};

inline size_t mix(size_t h, size_t v) { return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)); }

class Hasher {
 public:
  explicit Hasher(bool map_free) : map_free_(map_free) {}

  size_t hash(const Expr &e) {
    if (!e.defined()) return 0x5bd1e995;
    size_t h = mix(static_cast<size_t>(e->node_type), std::hash<std::string>()(e.type().to_string()));
    switch (e->node_type) {
      case NodeType::IntImm: return mix(h, std::hash<int64_t>()(e.as<IntImmNode>()->value));
      case NodeType::FloatImm: return mix(h, std::hash<double>()(e.as<FloatImmNode>()->value));
      case NodeType::StringImm: return mix(h, std::hash<std::string>()(e.as<StringImmNode>()->value));
      case NodeType::Variable: return mix(h, var(e.as<VariableNode>()));
      case NodeType::Let: {
        const auto *x = e.as<LetNode>();
        h = mix(h, hash(x->value));
        def(x->var.get());
        return mix(h, hash(x->body));
      }
      case NodeType::Call: {
        const auto *x = e.as<CallNode>();
        h = mix(h, std::hash<std::string>()(x->name));
        for (const auto &a : x->args) h = mix(h, hash(a));
        return h;
      }
      case NodeType::Ramp: h = mix(h, static_cast<size_t>(e.as<RampNode>()->lanes)); break;
      case NodeType::Broadcast: h = mix(h, static_cast<size_t>(e.as<BroadcastNode>()->lanes)); break;
      case NodeType::Load: h = mix(h, var(e.as<LoadNode>()->buffer_var.get())); break;
      case NodeType::ProducerLoad:
        h = mix(h, std::hash<const void *>()(e.as<ProducerLoadNode>()->producer.get()));
        h = mix(h, static_cast<size_t>(e.as<ProducerLoadNode>()->value_index));
        break;
      case NodeType::Reduce: {
        const auto *x = e.as<ReduceNode>();
        h = mix(h, std::hash<const void *>()(x->combiner.get()));
        for (const auto &iv : x->axis) {
          h = mix(h, hash(iv->dom.min));
          h = mix(h, hash(iv->dom.extent));
          def(iv->var.get());
        }
        break;
      }
      default: break;
    }
    children(e, [&](const Expr &c) { h = mix(h, hash(c)); });
    return h;
  }

  size_t hash(const Stmt &s) {
    if (!s.defined()) return 0x27d4eb2d;
    size_t h = static_cast<size_t>(s->node_type) * 0x100000001b3ULL;
    switch (s->node_type) {
      case NodeType::LetStmt: {
        const auto *x = s.as<LetStmtNode>();
        h = mix(h, hash(x->value));
        def(x->var.get());
        return mix(h, hash(x->body));
      }
      case NodeType::AttrStmt: {
        const auto *x = s.as<AttrStmtNode>();
        h = mix(h, std::hash<std::string>()(x->key));
        h = mix(h, hash(x->node));
        h = mix(h, hash(x->value));
        return mix(h, hash(x->body));
      }
      case NodeType::AssertStmt: {
        const auto *x = s.as<AssertStmtNode>();
        h = mix(h, hash(x->condition));
        return mix(h, hash(x->body));
      }
      case NodeType::Store: {
        const auto *x = s.as<StoreNode>();
        h = mix(h, var(x->buffer_var.get()));
        h = mix(h, hash(x->value));
        h = mix(h, hash(x->index));
        return mix(h, hash(x->predicate));
      }
      case NodeType::ProducerStore: {
        const auto *x = s.as<ProducerStoreNode>();
        h = mix(h, std::hash<const void *>()(x->producer.get()));
        h = mix(h, hash(x->value));
        for (const auto &i : x->indices) h = mix(h, hash(i));
        return h;
      }
      case NodeType::Allocate: {
        const auto *x = s.as<AllocateNode>();
        h = mix(h, std::hash<std::string>()(x->dtype.to_string() + x->scope));
        for (const auto &e : x->extents) h = mix(h, hash(e));
        def(x->buffer_var.get());
        return mix(h, hash(x->body));
      }
      case NodeType::For: {
        const auto *x = s.as<ForNode>();
        h = mix(h, static_cast<size_t>(x->kind));
        h = mix(h, std::hash<std::string>()(x->thread_tag));
        h = mix(h, hash(x->min));
        h = mix(h, hash(x->extent));
        def(x->loop_var.get());
        return mix(h, hash(x->body));
      }
      case NodeType::IfThenElse: {
        const auto *x = s.as<IfThenElseNode>();
        h = mix(h, hash(x->condition));
        h = mix(h, hash(x->then_case));
        return mix(h, hash(x->else_case));
      }
      case NodeType::Block:
        for (const auto &c : s.as<BlockNode>()->stmts) h = mix(h, hash(c));
        return h;
      case NodeType::Evaluate: return mix(h, hash(s.as<EvaluateNode>()->value));
      case NodeType::ProducerRealize: {
        const auto *x = s.as<ProducerRealizeNode>();
        h = mix(h, std::hash<const void *>()(x->producer.get()));
        for (const auto &r : x->bounds) h = mix(mix(h, hash(r.min)), hash(r.extent));
        return mix(h, hash(x->body));
      }
      default: return h;
    }
  }

 private:
  void def(const VariableNode *v) { index_[v] = next_++; }
  size_t var(const VariableNode *v) {
    auto it = index_.find(v);
    if (it != index_.end()) return it->second * 31 + 7;
    if (map_free_) {
      index_[v] = next_++;
      return index_[v] * 31 + 7;
    }
    return std::hash<const void *>()(v);
  }

  template <typename F>
  void children(const Expr &e, F f) {
    switch (e->node_type) {
#define KILN_BIN(n)                            \
  case NodeType::n:                            \
    f(e.as<n##Node>()->a);                     \
    f(e.as<n##Node>()->b);                     \
    break;
      KILN_BIN(Add) KILN_BIN(Sub) KILN_BIN(Mul) KILN_BIN(Div) KILN_BIN(Mod) KILN_BIN(FloorDiv) KILN_BIN(FloorMod)
      KILN_BIN(Min) KILN_BIN(Max) KILN_BIN(EQ) KILN_BIN(NE) KILN_BIN(LT) KILN_BIN(LE) KILN_BIN(GT) KILN_BIN(GE)
      KILN_BIN(And) KILN_BIN(Or)
#undef KILN_BIN
      case NodeType::Cast: f(e.as<CastNode>()->value); break;
      case NodeType::Not: f(e.as<NotNode>()->a); break;
      case NodeType::Select:
        f(e.as<SelectNode>()->condition);
        f(e.as<SelectNode>()->true_value);
        f(e.as<SelectNode>()->false_value);
        break;
      case NodeType::Ramp:
        f(e.as<RampNode>()->base);
        f(e.as<RampNode>()->stride);
        break;
      case NodeType::Broadcast: f(e.as<BroadcastNode>()->value); break;
      case NodeType::Load:
        f(e.as<LoadNode>()->index);
        f(e.as<LoadNode>()->predicate);
        break;
      case NodeType::ProducerLoad:
        for (const auto &i : e.as<ProducerLoadNode>()->indices) f(i);
        break;
      case NodeType::Reduce:
        for (const auto &s : e.as<ReduceNode>()->source) f(s);
        f(e.as<ReduceNode>()->condition);
        break;
      default: break;
    }
  }

  bool map_free_;
  std::unordered_map<const VariableNode *, size_t> index_;
  size_t next_ = 1;
};

}  // namespace

bool structural_equal(const Expr &a, const Expr &b, bool map_free_vars) { return Equal(map_free_vars).eq(a, b); }
bool structural_equal(const Stmt &a, const Stmt &b, bool map_free_vars) { return Equal(map_free_vars).eq(a, b); }
size_t structural_hash(const Expr &e, bool map_free_vars) { return Hasher(map_free_vars).hash(e); }
size_t structural_hash(const Stmt &s, bool map_free_vars) { return Hasher(map_free_vars).hash(s); }

}  // namespace kiln::ir
