#include <algorithm>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "compiler/arith/analyzer.h"
#include "compiler/ir/ir_visitor.h"
#include "compiler/ir/op.h"
#include "compiler/ir/structural.h"
#include "compiler/ir/substitute.h"
#include "compiler/pass/passes.h"

namespace kiln::pass {

namespace {

using namespace ir;

// What a loop body holds that matters for partitioning it: the comparisons under likely(), the
// constant ranges of the loops inside it, the loops of constant extent that start at an
// expression (a register tile placed at an outer loop: for (x, xo * 8, 8)), and the variables
// defined inside it otherwise.
class BodyInfo : public IRVisitor {
 public:
  std::vector<Expr> conditions;
  std::unordered_map<const VariableNode *, std::pair<int64_t, int64_t>> ranges;  // inclusive
  std::unordered_map<const VariableNode *, std::pair<Expr, int64_t>> shifted;    // min, extent
  std::unordered_set<const VariableNode *> unbounded;
  bool unsafe = false;  // thread bindings or barriers: copies of the body could diverge

  bool bounded(const VariableNode *v) const { return ranges.count(v) && !unbounded.count(v); }
  bool defined_inside(const VariableNode *v) const { return ranges.count(v) || shifted.count(v) || unbounded.count(v); }

  using IRVisitor::visit;
  void visit(const ForNode *op) override {
    auto min = as_const_int(op->min), extent = as_const_int(op->extent);
    const VariableNode *v = op->loop_var.get();
    if (op->kind == ForKind::ThreadBinding) unsafe = true;
    if (min && extent && *extent > 0) {
      auto [it, inserted] = ranges.emplace(v, std::make_pair(*min, *min + *extent - 1));
      if (!inserted) it->second = {std::min(it->second.first, *min), std::max(it->second.second, *min + *extent - 1)};
    } else if (extent && *extent > 0 && op->min.type() == op->loop_var.type()) {
      auto [it, inserted] = shifted.emplace(v, std::make_pair(op->min, *extent));
      if (!inserted && !(it->second.second == *extent && structural_equal(it->second.first, op->min))) {
        unbounded.insert(v);
      }
    } else {
      unbounded.insert(v);
    }
    IRVisitor::visit(op);
  }
  void visit(const LetStmtNode *op) override {
    unbounded.insert(op->var.get());
    IRVisitor::visit(op);
  }
  void visit(const LetNode *op) override {
    unbounded.insert(op->var.get());
    IRVisitor::visit(op);
  }
  void visit(const AllocateNode *op) override {
    unbounded.insert(op->buffer_var.get());
    IRVisitor::visit(op);
  }
  void visit(const AttrStmtNode *op) override {
    if (op->key == attr::kThreadExtent || op->key == attr::kVirtualThread) unsafe = true;
    IRVisitor::visit(op);
  }
  void visit(const CallNode *op) override {
    if (op->name == intrinsic::kSyncThreads) unsafe = true;
    if (op->name == intrinsic::kLikely && op->args.size() == 1) collect(op->args[0]);
    IRVisitor::visit(op);
  }

 private:
  void collect(const Expr &e) {
    if (const auto *a = e.as<AndNode>()) {
      collect(a->a);
      collect(a->b);
    } else if (const auto *c = e.as<CallNode>(); c && c->name == intrinsic::kLikely && c->args.size() == 1) {
      collect(c->args[0]);
    } else if (e.as<LTNode>() || e.as<LENode>() || e.as<GTNode>() || e.as<GENode>()) {
      conditions.push_back(e);
    }
  }
};

// A signed multiple of an expression; a constant when `atom` is undefined.
struct Term {
  int64_t coef;
  Expr atom;
};

void flatten(const Expr &e, int64_t sign, std::vector<Term> *terms) {
  if (const auto *i = e.as<IntImmNode>()) {
    terms->push_back({sign * i->value, Expr()});
  } else if (const auto *a = e.as<AddNode>()) {
    flatten(a->a, sign, terms);
    flatten(a->b, sign, terms);
  } else if (const auto *s = e.as<SubNode>()) {
    flatten(s->a, sign, terms);
    flatten(s->b, -sign, terms);
  } else if (const auto *m = e.as<MulNode>(); m && as_const_int(m->b)) {
    flatten(m->a, sign * *as_const_int(m->b), terms);
  } else if (m && as_const_int(m->a)) {
    flatten(m->b, sign * *as_const_int(m->a), terms);
  } else {
    terms->push_back({sign, e});
  }
}

// The sum of `terms` plus `constant`, positive terms first.
Expr build_sum(const std::vector<Term> &terms, int64_t constant, DataType t) {
  Expr sum;
  for (int positive = 1; positive >= 0; --positive) {
    for (const auto &term : terms) {
      if ((term.coef > 0) != (positive == 1) || term.coef == 0) continue;
      int64_t mag = term.coef > 0 ? term.coef : -term.coef;
      Expr e = mag == 1 ? term.atom : term.atom * make_const(t, mag);
      sum = !sum.defined() ? (positive ? e : make_zero(t) - e) : (positive ? sum + e : sum - e);
    }
  }
  if (!sum.defined()) return make_const(t, constant);
  if (constant > 0) return sum + make_const(t, constant);
  if (constant < 0) return sum - make_const(t, -constant);
  return sum;
}

// Where a likely condition holds in the loop over v: for all v < point (upper) or all v >= point.
// An exact split depends on no loop inside the body: the condition then fails at every other v.
struct Split {
  Expr point;
  bool upper;
  bool exact;
};

// Solves a comparison that is linear in v, for every value of the loops inside the body, when its
// other terms are loop-invariant: sum(c_i * x_i) + c*v < k gives c*v < k - max(sum) =: T, so
// v < ceildiv(T, c) for c > 0 and v > floordiv(-T, -c) for c < 0.
std::optional<Split> solve(const Expr &cmp, const VariableNode *v, const BodyInfo &info) {
  Expr a, b;
  int64_t k = 0;  // the comparison is a - b < k
  if (const auto *x = cmp.as<LTNode>()) a = x->a, b = x->b;
  if (const auto *x = cmp.as<LENode>()) a = x->a, b = x->b, k = 1;
  if (const auto *x = cmp.as<GTNode>()) a = x->b, b = x->a;
  if (const auto *x = cmp.as<GENode>()) a = x->b, b = x->a, k = 1;
  if (!a.defined() || !a.type().is_int() || a.type().is_vector()) return std::nullopt;
  std::vector<Term> terms, outer;
  flatten(a, 1, &terms);
  flatten(b, -1, &terms);
  // A loop that starts at an expression is that expression plus an offset in [0, extent): its
  // variable stands for the offset, and the expression joins the terms.
  std::unordered_map<const VariableNode *, int64_t> offsets;
  for (size_t done = 0; done < terms.size();) {
    std::vector<std::pair<const VariableNode *, int64_t>> found;  // in order of appearance
    for (size_t i = done; i < terms.size(); ++i) {
      const auto *var = terms[i].atom.as<VariableNode>();
      if (!var || !info.shifted.count(var) || info.unbounded.count(var)) continue;
      if (offsets.count(var)) return std::nullopt;  // it reappears in another loop's start
      auto it = std::find_if(found.begin(), found.end(), [var](const auto &f) { return f.first == var; });
      if (it == found.end()) {
        found.emplace_back(var, terms[i].coef);
      } else {
        it->second += terms[i].coef;
      }
    }
    done = terms.size();
    for (const auto &[var, coef] : found) {
      const auto &[min, extent] = info.shifted.at(var);
      offsets.emplace(var, extent - 1);
      flatten(min, coef, &terms);
    }
  }
  int64_t coef = 0, constant = 0, inner_max = 0;
  bool exact = true;
  for (const auto &t : terms) {
    const auto *var = t.atom.as<VariableNode>();
    if (!t.atom.defined()) {
      constant += t.coef;
    } else if (var == v) {
      coef += t.coef;
    } else if (var && info.bounded(var)) {
      const auto &r = info.ranges.at(var);
      inner_max += t.coef * (t.coef > 0 ? r.second : r.first);
      if (t.coef != 0 && r.first != r.second) exact = false;
    } else if (var && offsets.count(var)) {
      const int64_t last = offsets.at(var);
      inner_max += t.coef > 0 ? t.coef * last : 0;
      if (t.coef != 0 && last != 0) exact = false;
    } else {
      // Anything else must keep its value during the whole loop.
      bool invariant = true;
      post_order_visit(t.atom, [&](const IRNode *n) {
        if (n == v || n->node_type == NodeType::Load || n->node_type == NodeType::Call ||
            n->node_type == NodeType::ProducerLoad || n->node_type == NodeType::Reduce ||
            (n->node_type == NodeType::Variable && info.defined_inside(static_cast<const VariableNode *>(n)))) {
          invariant = false;
        }
      });
      if (!invariant) return std::nullopt;
      outer.push_back(t);
    }
  }
  if (coef == 0) return std::nullopt;
  const int64_t slack = k - constant - inner_max;  // T = slack - sum(outer)
  DataType t = a.type();
  if (coef > 0) {
    // v < ceildiv(T, coef) = floordiv(T + coef - 1, coef)
    for (auto &o : outer) o.coef = -o.coef;
    Expr numer = build_sum(outer, slack + coef - 1, t);
    return Split{coef == 1 ? numer : floordiv(numer, make_const(t, coef)), true, exact};
  }
  // -coef * v > -T: v >= floordiv(-T, -coef) + 1 = floordiv(-T - coef, -coef)
  Expr numer = build_sum(outer, -slack - coef, t);
  return Split{coef == -1 ? numer : floordiv(numer, make_const(t, -coef)), false, exact};
}

// Replaces the comparisons whose value is known in a part of the loop by that value and folds what
// becomes constant: guards, selects, predicates; a statement under a false guard is dropped.
class FoldKnown : public IRMutator {
 public:
  explicit FoldKnown(const std::unordered_map<const IRNode *, bool> &known) : known_(known) {}
  using IRMutator::mutate;
  Expr mutate(const Expr &e) override {
    if (e.defined()) {
      auto it = known_.find(e.get());
      if (it != known_.end()) return it->second ? const_true() : const_false();
    }
    return IRMutator::mutate(e);
  }

 protected:
  using IRMutator::visit;
  Expr visit(const AndNode *op, const Expr &self) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (is_zero(a) || is_zero(b)) return const_false();
    if (is_one(a)) return b;
    if (is_one(b)) return a;
    if (a.same_as(op->a) && b.same_as(op->b)) return self;
    return AndNode::make(a, b);
  }
  Expr visit(const OrNode *op, const Expr &self) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (is_one(a) || is_one(b)) return const_true();
    if (is_zero(a)) return b;
    if (is_zero(b)) return a;
    if (a.same_as(op->a) && b.same_as(op->b)) return self;
    return OrNode::make(a, b);
  }
  Expr visit(const CallNode *op, const Expr &self) override {
    Expr e = IRMutator::visit(op, self);
    const auto *c = e.as<CallNode>();
    if (c && c->name == intrinsic::kLikely && (is_one(c->args[0]) || is_zero(c->args[0]))) return c->args[0];
    if (c && c->name == intrinsic::kIfThenElse && is_one(c->args[0])) return c->args[1];
    if (c && c->name == intrinsic::kIfThenElse && is_zero(c->args[0])) return c->args[2];
    return e;
  }
  Expr visit(const SelectNode *op, const Expr &self) override {
    Expr e = IRMutator::visit(op, self);
    const auto *s = e.as<SelectNode>();
    if (s && is_one(s->condition)) return s->true_value;
    if (s && is_zero(s->condition)) return s->false_value;
    return e;
  }
  Expr visit(const LoadNode *op, const Expr &self) override {
    Expr e = IRMutator::visit(op, self);
    const auto *l = e.as<LoadNode>();
    return l && is_one(l->predicate) ? LoadNode::make(l->type, l->buffer_var, l->index) : e;
  }
  Stmt visit(const IfThenElseNode *op, const Stmt &self) override {
    Stmt s = IRMutator::visit(op, self);
    const auto *i = s.as<IfThenElseNode>();
    if (i && is_one(i->condition)) return i->then_case;
    if (i && is_zero(i->condition)) return i->else_case.defined() ? i->else_case : make_nop();
    return s;
  }
  Stmt visit(const StoreNode *op, const Stmt &self) override {
    Stmt s = IRMutator::visit(op, self);
    const auto *st = s.as<StoreNode>();
    if (st && is_one(st->predicate)) return StoreNode::make(st->buffer_var, st->value, st->index);
    if (st && is_zero(st->predicate)) return make_nop();
    return s;
  }
  Stmt visit(const ForNode *op, const Stmt &self) override {
    Stmt s = IRMutator::visit(op, self);
    const auto *f = s.as<ForNode>();
    return f && is_nop(f->body) ? make_nop() : s;
  }
  Stmt visit(const BlockNode *op, const Stmt &self) override {
    Stmt s = IRMutator::visit(op, self);
    const auto *b = s.as<BlockNode>();
    if (!b) return s;
    std::vector<Stmt> kept;
    for (const auto &st : b->stmts) {
      if (!is_nop(st)) kept.push_back(st);
    }
    if (kept.size() == b->stmts.size()) return s;
    return kept.empty() ? make_nop() : BlockNode::make(std::move(kept));
  }

 private:
  const std::unordered_map<const IRNode *, bool> &known_;
};

class LoopPartitioner : public IRMutator {
 protected:
  using IRMutator::visit;

  Stmt visit(const ForNode *op, const Stmt &self) override {
    if (op->kind != ForKind::ThreadBinding) {
      if (auto s = partition(op)) return *s;
    }
    analyzer_.bind(op->loop_var, Range(op->min, op->extent));
    Stmt body = mutate(op->body);
    analyzer_.unbind(op->loop_var);
    if (body.same_as(op->body)) return self;
    return ForNode::make(op->loop_var, op->min, op->extent, op->kind, body, op->thread_tag);
  }

  Stmt visit(const LetStmtNode *op, const Stmt &self) override {
    analyzer_.bind(op->var, op->value);
    Stmt body = mutate(op->body);
    analyzer_.unbind(op->var);
    if (body.same_as(op->body)) return self;
    return LetStmtNode::make(op->var, op->value, body);
  }

 private:
  // a <= b, also through floordiv by one positive constant (monotonic), which split points and
  // ceil-divided loop extents share.
  bool provably_le(const Expr &a, const Expr &b) {
    const auto *fa = a.as<FloorDivNode>(), *fb = b.as<FloorDivNode>();
    if (fa && fb) {
      int64_t c = as_const_int(fa->b).value_or(0);
      if (c > 0 && is_const_int(fb->b, c) && provably_le(fa->a, fb->a)) return true;
    }
    return analyzer_.can_prove(a <= b);
  }

  // min(x, hi) and max(lo, x), without the parts that are provably unnecessary.
  Expr at_most(const Expr &x, const Expr &hi) { return analyzer_.simplify(provably_le(x, hi) ? x : min(x, hi)); }
  Expr at_least(const Expr &x, const Expr &lo) { return analyzer_.simplify(provably_le(lo, x) ? x : max(lo, x)); }

  bool provably_empty(const Expr &extent) { return analyzer_.can_prove(extent <= make_zero(extent.type())); }

  // Splits the loop into [begin, lo) guarded, [lo, hi) with the proven conditions removed and
  // [hi, end) guarded; nullopt when no likely condition in its body can be solved for its variable.
  // When one condition alone sets lo (or hi) and depends on no loop inside the body, it is false
  // in the head (or tail), which keeps only what does not need it: a guard that fails everywhere
  // there is dropped. When no iteration satisfies every condition, a head and a tail of constant
  // extents are still worth separating: their copies may fold the guards once the loop variable is
  // a constant (after unrolling).
  std::optional<Stmt> partition(const ForNode *op) {
    BodyInfo info;
    info.visit_stmt(op->body);
    if (info.unsafe) return std::nullopt;
    std::unordered_set<const IRNode *> proven;
    Expr upper, lower;
    const IRNode *only_lower = nullptr, *only_upper = nullptr;
    int n_lower = 0, n_upper = 0;
    for (const auto &c : info.conditions) {
      if (proven.count(c.get())) continue;
      auto split = solve(c, op->loop_var.get(), info);
      // A condition that split an enclosing loop splits this one again only where that leaves no
      // guarded copy: when it depends on no loop inside.
      if (!split || (done_.count(c.get()) && !split->exact)) continue;
      proven.insert(c.get());
      Expr p = cast(op->loop_var.type(), split->point);
      if (split->upper) {
        upper = upper.defined() ? min(upper, p) : p;
        only_upper = ++n_upper == 1 && split->exact ? c.get() : nullptr;
      } else {
        lower = lower.defined() ? max(lower, p) : p;
        only_lower = ++n_lower == 1 && split->exact ? c.get() : nullptr;
      }
    }
    if (proven.empty()) return std::nullopt;

    const Var &v = op->loop_var;
    Expr begin = op->min, end = analyzer_.simplify(op->min + op->extent);
    Expr lo = lower.defined() ? at_least(at_most(lower, end), begin) : begin;
    Expr main_end = upper.defined() ? at_most(upper, end) : end;
    Expr hi = at_least(main_end, lo);
    // A serial loop with a negative extent runs no iteration: its main part may stop at main_end
    // (floordiv(n, 8) rather than max(floordiv(n, 8), lo)).
    Expr head_extent = analyzer_.simplify(lo - begin), tail_extent = analyzer_.simplify(end - hi);
    Expr main_extent = analyzer_.simplify((op->kind == ForKind::Serial ? main_end : hi) - lo);
    const bool constant_ends = as_const_int(head_extent) && as_const_int(main_extent) && as_const_int(tail_extent);
    const bool no_main = provably_empty(main_extent);
    if (no_main && !(constant_ends && *as_const_int(head_extent) > 0 && *as_const_int(tail_extent) > 0)) {
      return std::nullopt;
    }
    // Vectorized and unrolled loops need constant extents; keep them whole otherwise.
    if ((op->kind == ForKind::Vectorized || op->kind == ForKind::Unrolled) && !constant_ends) return std::nullopt;
    std::vector<const IRNode *> added;
    for (const auto *c : proven) {
      if (done_.insert(c).second) added.push_back(c);
    }

    std::vector<Stmt> parts;
    auto guarded = [&](const Expr &from, const Expr &extent, const IRNode *fails) {
      if (provably_empty(extent)) return;
      Stmt body = op->body;
      if (fails) {
        body = FoldKnown({{fails, false}}).mutate(body);
        if (is_nop(body)) return;
      }
      analyzer_.bind(v, Range(from, extent));
      body = mutate(body);
      analyzer_.unbind(v);
      Var fresh(v.name(), v.type());
      body = copy_with_fresh_vars(body, {{v.get(), fresh}});
      parts.push_back(ForNode::make(fresh, from, extent, op->kind, body, op->thread_tag));
    };
    guarded(begin, head_extent, only_lower);
    if (!no_main) {
      std::unordered_map<const IRNode *, bool> holds;
      for (const auto *c : proven) holds.emplace(c, true);
      analyzer_.bind(v, Range(lo, main_extent));
      Stmt main_body = mutate(FoldKnown(holds).mutate(op->body));
      analyzer_.unbind(v);
      parts.push_back(ForNode::make(v, lo, main_extent, op->kind, main_body, op->thread_tag));
    }
    guarded(hi, tail_extent, only_upper);
    // The conditions stay in use for the loops of the copies above, not for loops elsewhere.
    for (const auto *c : added) done_.erase(c);
    // A vectorized loop is cut only into vectors of power-of-two lanes: a vector of 16 cut at its
    // first lane (a padded column) is one lane and 15, whose odd vector of 15 costs more (its
    // masks built lane by lane, its stores in pieces) than the condition as one vector's mask. (A
    // piece left alone is kept: the other's body did nothing.)
    if (op->kind == ForKind::Vectorized && parts.size() > 1) {
      for (const Stmt &part : parts) {
        const int64_t n = *as_const_int(part.as<ForNode>()->extent);
        if ((n & (n - 1)) != 0) return std::nullopt;
      }
    }
    return parts.empty() ? make_nop() : BlockNode::make(std::move(parts));
  }

  arith::Analyzer analyzer_;
  // Conditions used to partition an enclosing loop; its guarded copies keep them, and use them
  // again only for exact splits.
  std::unordered_set<const IRNode *> done_;
};

}  // namespace

Stmt loop_partition(const Stmt &s) { return LoopPartitioner().mutate(s); }

}  // namespace kiln::pass
