// fuse_with_next: a loop marked by Stage::fuse_with_next becomes one loop with the next loop of the
// same range, so that each iteration runs the marked loop's body, then the next loop's.
//
// The next loop is the first statement after the marked loop in the same sequence that depends on
// it (reads what it writes, or writes what it reads or writes), looking inside the allocations that
// follow it (the marked loop moves into their scope; it cannot use a buffer they allocate); it must
// be a loop. The independent statements passed over on the way move before the fused loop.
//
// Fusing is legal when, for each buffer the marked loop writes and the next loop reads, the marked
// loop has one store into it, the next loop reads it only at that store's index under the same
// loops and conditions (the loops of the same ranges in the same order, so that iteration k of the
// next loop reads only elements iteration k of the marked loop wrote), and the store's index is a
// one-to-one function of the loop variables (an affine index whose coefficients leave no two
// iterations the same element: no later iteration overwrites what an earlier one's reader read);
// and the next loop writes nothing the marked loop reads or writes. Otherwise the pass throws a
// ScheduleError that says which condition fails.
#include <algorithm>
#include <functional>
#include <optional>
#include <sstream>
#include <set>
#include <string>
#include <vector>

#include "compiler/arith/analyzer.h"
#include "compiler/arith/analyzer_state.h"
#include "compiler/arith/linear_form.h"
#include "compiler/ir/error.h"
#include "compiler/ir/ir_printer.h"
#include "compiler/ir/op.h"
#include "compiler/ir/ir_visitor.h"
#include "compiler/ir/structural.h"
#include "compiler/ir/substitute.h"
#include "compiler/pass/passes.h"

namespace kiln::pass {

namespace {

using namespace ir;

const std::string &marker_key() {
  static const std::string k = attr::kPragmaFuseWithNext;
  return k;
}

using BufferSet = std::set<const VariableNode *>;

// Buffers a statement reads and writes; `opaque` when it has calls with effects or uses a buffer's
// handle other than through loads and stores (its accesses are then unknown).
struct Accesses {
  BufferSet reads, writes;
  bool opaque = false;
};

Accesses accesses(const Stmt &s) {
  Accesses a;
  BufferSet through_access;
  post_order_visit(s, [&](const IRNode *n) {
    if (n->node_type == NodeType::Load) {
      a.reads.insert(static_cast<const LoadNode *>(n)->buffer_var.get());
    } else if (n->node_type == NodeType::Store) {
      a.writes.insert(static_cast<const StoreNode *>(n)->buffer_var.get());
    } else if (n->node_type == NodeType::Call) {
      a.opaque = a.opaque || static_cast<const CallNode *>(n)->kind != CallNode::Kind::PureIntrinsic;
    }
  });
  // A handle variable used as a value (passed to a call, bound by a let) escapes the analysis.
  post_order_visit(s, [&](const IRNode *n) {
    if (n->node_type == NodeType::Call) {
      for (const Expr &arg : static_cast<const CallNode *>(n)->args) {
        if (arg.get() && arg->node_type == NodeType::Variable && arg.type().is_handle()) a.opaque = true;
      }
    }
  });
  return a;
}

bool intersects(const BufferSet &a, const BufferSet &b) {
  return std::any_of(a.begin(), a.end(), [&](const VariableNode *v) { return b.count(v) > 0; });
}

std::string names(const BufferSet &a, const BufferSet &b) {
  std::string out;
  for (const VariableNode *v : a) {
    if (b.count(v)) out += (out.empty() ? "" : ", ") + v->name;
  }
  return out;
}

// One enclosing statement of an access, from the fused loop's body inwards.
struct Frame {
  enum class Kind { For, If, Else, Let } kind;
  Var var;        // For, Let
  Expr a, b;      // For: min, extent; If/Else: condition; Let: value
  bool constant;  // For: constant extent
};

struct Access {
  Expr index, predicate;
  std::vector<Frame> frames;
};

// Collects the stores into and the loads of `buf` in a statement with their enclosing frames.
class AccessCollector {
 public:
  explicit AccessCollector(const VariableNode *buf) : buf_(buf) {}
  std::vector<Access> stores, loads;

  void stmt(const Stmt &s) {
    if (!s.defined()) return;
    switch (s->node_type) {
      case NodeType::For: {
        const auto *f = s.as<ForNode>();
        expr(f->min);
        expr(f->extent);
        frames_.push_back({Frame::Kind::For, f->loop_var, f->min, f->extent, as_const_int(f->extent).has_value()});
        stmt(f->body);
        frames_.pop_back();
        return;
      }
      case NodeType::IfThenElse: {
        const auto *i = s.as<IfThenElseNode>();
        expr(i->condition);
        frames_.push_back({Frame::Kind::If, Var(), i->condition, Expr(), true});
        stmt(i->then_case);
        frames_.back().kind = Frame::Kind::Else;
        stmt(i->else_case);
        frames_.pop_back();
        return;
      }
      case NodeType::LetStmt: {
        const auto *l = s.as<LetStmtNode>();
        expr(l->value);
        frames_.push_back({Frame::Kind::Let, l->var, l->value, Expr(), true});
        stmt(l->body);
        frames_.pop_back();
        return;
      }
      case NodeType::Store: {
        const auto *st = s.as<StoreNode>();
        expr(st->value);
        expr(st->index);
        if (st->predicate.defined()) expr(st->predicate);
        if (st->buffer_var.get() == buf_) stores.push_back({st->index, st->predicate, frames_});
        return;
      }
      case NodeType::Block:
        for (const Stmt &c : s.as<BlockNode>()->stmts) stmt(c);
        return;
      case NodeType::Allocate: {
        const auto *al = s.as<AllocateNode>();
        for (const Expr &e : al->extents) expr(e);
        stmt(al->body);
        return;
      }
      case NodeType::AttrStmt: {
        const auto *at = s.as<AttrStmtNode>();
        if (at->value.defined()) expr(at->value);
        stmt(at->body);
        return;
      }
      case NodeType::AssertStmt: {
        const auto *as = s.as<AssertStmtNode>();
        expr(as->condition);
        stmt(as->body);
        return;
      }
      case NodeType::Evaluate:
        expr(s.as<EvaluateNode>()->value);
        return;
      default:
        // Other statements (lowered IR has none here) are searched without their frames.
        post_order_visit(s, [&](const IRNode *n) { load(n); });
        return;
    }
  }

 private:
  void expr(const Expr &e) {
    post_order_visit(e, [&](const IRNode *n) { load(n); });
  }
  void load(const IRNode *n) {
    if (n->node_type != NodeType::Load) return;
    const auto *l = static_cast<const LoadNode *>(n);
    if (l->buffer_var.get() == buf_) loads.push_back({l->index, l->predicate, frames_});
  }
  const VariableNode *buf_;
  std::vector<Frame> frames_;
};

bool same_expr(const Expr &a, const Expr &b) {
  if (a.defined() != b.defined()) return false;
  return !a.defined() || structural_equal(arith::simplify(a), arith::simplify(b));
}

// The conjuncts of a condition (likely() hints dropped, `true` left out).
void conjuncts(const Expr &e, std::vector<Expr> *out) {
  if (const auto *c = e.as<CallNode>(); c && c->name == intrinsic::kLikely && c->args.size() == 1) {
    conjuncts(c->args[0], out);
  } else if (const auto *a = e.as<AndNode>()) {
    conjuncts(a->a, out);
    conjuncts(a->b, out);
  } else if (!is_one(e)) {
    out->push_back(e);
  }
}

// The conditions an access runs under (the conjuncts of its if statements; an else branch's
// negated condition), simplified, with the variables renamed by `m`.
std::vector<Expr> guards(const Access &x, const VarMap &m) {
  std::vector<Expr> parts, out;
  for (const Frame &f : x.frames) {
    if (f.kind == Frame::Kind::If) conjuncts(f.a, &parts);
    if (f.kind == Frame::Kind::Else) parts.push_back(NotNode::make(f.a));
  }
  for (const Expr &p : parts) {
    Expr e = arith::simplify(substitute(p, m));
    if (!is_one(e)) out.push_back(e);
  }
  return out;
}

bool same_set(const std::vector<Expr> &a, const std::vector<Expr> &b) {
  auto covers = [](const std::vector<Expr> &x, const std::vector<Expr> &y) {
    return std::all_of(y.begin(), y.end(), [&](const Expr &e) {
      return std::any_of(x.begin(), x.end(), [&](const Expr &f) { return structural_equal(e, f); });
    });
  };
  return covers(a, b) && covers(b, a);
}

// Whether `load` (in the next loop, its variables renamed by `m` as it goes) reads exactly the
// element `store` writes, in the same iteration: the same loops (ranges) in the same order, the
// same conditions (in any order and nesting), the same index.
bool matches(const Access &store, const Access &load, VarMap m) {
  auto loops = [](const Access &x) {
    std::vector<const Frame *> out;
    for (const Frame &f : x.frames) {
      if (f.kind == Frame::Kind::For || f.kind == Frame::Kind::Let) out.push_back(&f);
    }
    return out;
  };
  const auto ls = loops(store), ll = loops(load);
  if (ls.size() != ll.size()) return false;
  for (size_t i = 0; i < ls.size(); ++i) {
    const Frame &s = *ls[i], &l = *ll[i];
    if (s.kind != l.kind) return false;
    if (!same_expr(s.a, substitute(l.a, m))) return false;
    if (s.kind == Frame::Kind::For && !same_expr(s.b, substitute(l.b, m))) return false;
    m[l.var.get()] = s.var;
  }
  return same_set(guards(store, {}), guards(load, m)) && same_expr(store.index, substitute(load.index, m)) &&
         same_expr(store.predicate, load.predicate.defined() ? substitute(load.predicate, m) : Expr());
}

// Whether the store writes a different element at each iteration of the loop `loop` and of the
// loops around the store inside it where its conditions hold: its index is an affine function of
// those variables whose terms, taken from the smallest coefficient, each exceed the span of the
// terms before them. A condition `e < c` with e affine in two or more of the loops (from zero),
// as a split's tail leaves, counts e as one term of extent c (where e appears in the index as a
// multiple of itself).
bool one_to_one(const Access &store, const ForNode *loop) {
  struct Dim {
    const VariableNode *var;
    int64_t extent;
    bool from_zero;
  };
  std::vector<Dim> dims;
  auto add = [&dims](const Var &v, const Expr &mn, const Expr &extent) {
    auto e = as_const_int(extent);
    if (!e) return false;
    dims.push_back({v.get(), *e, is_zero(mn)});
    return true;
  };
  if (!add(loop->loop_var, loop->min, loop->extent)) return false;
  for (const Frame &f : store.frames) {
    if (f.kind == Frame::Kind::For && !add(f.var, f.a, f.b)) return false;
    if (f.kind == Frame::Kind::Let) return false;  // a let's variable could stand for anything
  }
  auto find = [&dims](const Expr &atom) -> const Dim * {
    for (const Dim &d : dims) {
      if (atom.get() == d.var) return &d;
    }
    return nullptr;
  };
  auto coefficient = [](const arith::detail::LinearForm &f, const VariableNode *v) {
    int64_t c = 0;
    for (const auto &t : f.terms) {
      if (t.atom.get() == v) c += t.coeff;
    }
    return c;
  };
  // Digits (|coefficient|, extent) are one-to-one when each coefficient exceeds the span of the
  // smaller ones.
  auto mixed_radix = [](std::vector<std::pair<int64_t, int64_t>> terms) {
    std::sort(terms.begin(), terms.end());
    int64_t span = 0;
    for (const auto &[coeff, extent] : terms) {
      if (coeff <= span) return false;
      span += coeff * (extent - 1);
    }
    return true;
  };
  arith::detail::LinearForm form = arith::detail::linear_form(arith::simplify(store.index));
  if (!form.ok) return false;
  // No term but the loops' variables may vary with the loops.
  for (const auto &t : form.terms) {
    if (find(t.atom)) continue;
    bool uses_dim = false;
    post_order_visit(t.atom, [&](const IRNode *n) {
      for (const Dim &d : dims) uses_dim = uses_dim || n == d.var;
    });
    if (uses_dim) return false;
  }
  std::vector<std::pair<int64_t, int64_t>> digits;
  std::set<const VariableNode *> used;
  for (const Expr &g : guards(store, {})) {
    const auto *lt = g.as<LTNode>();
    if (!lt) continue;
    auto bound = as_const_int(lt->b);
    if (!bound) continue;
    arith::detail::LinearForm e = arith::detail::linear_form(lt->a);
    if (!e.ok || e.terms.size() < 2) continue;
    int64_t scale = 0;
    bool fits = true;
    std::vector<std::pair<int64_t, int64_t>> inner;
    for (const auto &t : e.terms) {
      const Dim *d = find(t.atom);
      if (!d || !d->from_zero || used.count(d->var) || t.coeff <= 0) {
        fits = false;
        break;
      }
      const int64_t c = coefficient(form, d->var);
      if (c % t.coeff != 0 || (scale != 0 && c / t.coeff != scale) || c == 0) {
        fits = false;
        break;
      }
      scale = c / t.coeff;
      inner.emplace_back(t.coeff, d->extent);
    }
    if (!fits || !mixed_radix(inner) || *bound - e.constant < 1) continue;
    for (const auto &t : e.terms) used.insert(t.atom.as<VariableNode>());
    digits.emplace_back(std::abs(scale), *bound - e.constant);
  }
  for (const Dim &d : dims) {
    if (used.count(d.var) || d.extent <= 1) continue;
    const int64_t c = coefficient(form, d.var);
    if (c == 0) return false;
    digits.emplace_back(std::abs(c), d.extent);
  }
  return mixed_radix(digits);
}

[[noreturn]] void refuse(const ForNode *loop, const std::string &why) {
  throw ScheduleError("cannot fuse loop " + loop->loop_var->name + " with the next loop: " + why);
}

// The fused loop of `first` and `next` (same range), after checking that it is legal.
Stmt fuse(const ForNode *first, const ForNode *next) {
  if (!same_expr(first->min, next->min) || !same_expr(first->extent, next->extent)) {
    std::ostringstream os;
    os << "the next loop " << next->loop_var->name << " runs over [" << next->min << ", " << next->min << " + "
       << next->extent << "), this one over [" << first->min << ", " << first->min << " + " << first->extent << ")";
    refuse(first, os.str());
  }
  if (first->kind == ForKind::Vectorized || first->kind == ForKind::ThreadBinding || first->kind != next->kind) {
    refuse(first, std::string("the loops are ") + for_kind_name(first->kind) + " and " + for_kind_name(next->kind) +
                      " (both must be serial, unrolled or parallel alike)");
  }
  const Accesses a = accesses(first->body), b = accesses(next->body);
  if (a.opaque || b.opaque) refuse(first, "a loop calls a function with effects or passes a buffer's handle");
  if (intersects(b.writes, a.reads) || intersects(b.writes, a.writes)) {
    refuse(first, "the next loop writes " + names(b.writes, a.reads.empty() ? a.writes : [&] {
                    BufferSet u = a.reads;
                    u.insert(a.writes.begin(), a.writes.end());
                    return u;
                  }()) + ", which this loop uses");
  }
  VarMap rename{{next->loop_var.get(), first->loop_var}};
  for (const VariableNode *buf : a.writes) {
    if (!b.reads.count(buf)) continue;
    AccessCollector in_first(buf), in_next(buf);
    in_first.stmt(first->body);
    in_next.stmt(next->body);
    if (in_first.stores.size() != 1) {
      refuse(first, detail::concat("this loop stores into ", buf->name, " ", in_first.stores.size(),
                                   " times (one store is needed to match the next loop's reads)"));
    }
    const Access &store = in_first.stores.front();
    for (const Access &load : in_next.loads) {
      if (!matches(store, load, rename)) {
        std::ostringstream os;
        os << "the next loop reads " << buf->name << "[" << load.index << "], not only the element " << buf->name << "["
           << store.index << "] this loop writes in the same iteration";
        refuse(first, os.str());
      }
    }
    if (!one_to_one(store, first)) {
      std::ostringstream os;
      os << "the index of " << buf->name << "[" << store.index
         << "] may name one element in two iterations (it must be affine in the loops, one-to-one)";
      refuse(first, os.str());
    }
  }
  Stmt body = BlockNode::make(first->body, substitute(next->body, rename));
  return ForNode::make(first->loop_var, first->min, first->extent, first->kind, body, first->thread_tag);
}

std::vector<Stmt> flatten(const Stmt &s) {
  if (const auto *b = s.as<BlockNode>()) return b->stmts;
  return {s};
}

// Fuses `first` with the first loop in `rest` (searched as the file comment says); returns the
// statements that replace first and rest, or nothing when rest has no loop.
std::optional<std::vector<Stmt>> fuse_with_next(const Stmt &loop, const std::vector<Stmt> &rest) {
  const auto *first = loop.as<ForNode>();
  const Accesses a = accesses(loop);
  std::vector<Stmt> out;
  for (size_t j = 0; j < rest.size(); ++j) {
    const Stmt &s = rest[j];
    const Accesses x = accesses(s);
    if (!x.opaque && !intersects(x.writes, a.reads) && !intersects(x.writes, a.writes) &&
        !intersects(x.reads, a.writes)) {
      out.push_back(s);  // independent: runs before the fused loop
      continue;
    }
    std::optional<Stmt> replaced;
    if (const auto *f = s.as<ForNode>()) {
      replaced = fuse(first, f);
    } else if (const auto *al = s.as<AllocateNode>()) {
      if (auto inner = fuse_with_next(loop, flatten(al->body))) {
        replaced = AllocateNode::make(al->buffer_var, al->dtype, al->extents, al->scope, BlockNode::make(*inner));
      }
    } else if (const auto *at = s.as<AttrStmtNode>(); at && at->key == attr::kStorageScope) {
      if (auto inner = fuse_with_next(loop, flatten(at->body))) {
        replaced = AttrStmtNode::make(at->node, at->key, at->value, BlockNode::make(*inner));
      }
    }
    if (!replaced) {
      std::ostringstream os;
      os << "the first statement after it that uses what it writes or writes what it uses is not a loop:\n" << s;
      refuse(first, os.str());
    }
    out.push_back(*replaced);
    out.insert(out.end(), rest.begin() + static_cast<long>(j) + 1, rest.end());
    return out;
  }
  return std::nullopt;
}

// The loop under a fuse_with_next marker, or an undefined statement.
Stmt marked_loop(const Stmt &s) {
  const auto *at = s.as<AttrStmtNode>();
  if (!at || at->key != marker_key()) return Stmt();
  if (!at->body.as<ForNode>()) throw InternalError("the fuse_with_next marker is not on a loop");
  return at->body;
}

class Fuser : public IRMutator {
 protected:
  using IRMutator::visit;
  Stmt visit(const BlockNode *op, const Stmt &self) override {
    Stmt rebuilt = IRMutator::visit(op, self);
    const auto *b = rebuilt.as<BlockNode>();
    if (!b) return rebuilt;
    std::vector<Stmt> stmts = b->stmts;
    for (size_t i = 0; i < stmts.size(); ++i) {
      Stmt first = marked_loop(stmts[i]);
      if (!first.defined()) continue;
      std::vector<Stmt> rest(stmts.begin() + static_cast<long>(i) + 1, stmts.end());
      auto fused = fuse_with_next(first, rest);
      if (!fused) refuse(first.as<ForNode>(), "no statement after it uses what it writes");
      stmts.resize(i);
      stmts.insert(stmts.end(), fused->begin(), fused->end());
    }
    return BlockNode::make(stmts);
  }
};

// Whether `s` has an attribute `key` (a loop marked for one of this file's passes). Every kernel is
// lowered through them (the tuner lowers each candidate): without a marker there is nothing to do,
// and one read-only walk replaces the rewrite and the check.
bool has_marker(const Stmt &s, const std::string &key) {
  bool marked = false;
  post_order_visit(s, [&](const IRNode *n) {
    marked = marked || (n->node_type == NodeType::AttrStmt && static_cast<const AttrStmtNode *>(n)->key == key);
  });
  return marked;
}

// --- pipeline: the first loop of an iteration's body run one iteration early ---

const std::string &pipeline_key() {
  static const std::string k = attr::kPragmaPipeline;
  return k;
}

[[noreturn]] void refuse_pipeline(const ForNode *loop, const std::string &why) {
  throw ScheduleError("cannot pipeline loop " + loop->loop_var->name + ": " + why);
}

// A statement that only scopes what it wraps (an allocation, a storage scope): the wrapper with a
// new body.
using Rewrap = std::function<Stmt(const Stmt &)>;

std::optional<Rewrap> scope_wrapper(const Stmt &s, Stmt *inner) {
  if (const auto *al = s.as<AllocateNode>()) {
    *inner = al->body;
    return Rewrap(
        [n = al](const Stmt &b) { return AllocateNode::make(n->buffer_var, n->dtype, n->extents, n->scope, b); });
  }
  if (const auto *at = s.as<AttrStmtNode>(); at && at->key == attr::kStorageScope) {
    *inner = at->body;
    return Rewrap([n = at](const Stmt &b) { return AttrStmtNode::make(n->node, n->key, n->value, b); });
  }
  return std::nullopt;
}

// One loop running `a`'s and `b`'s iterations side by side (iteration k of each, a's body first),
// then the iterations of the longer one that the other has not.
Stmt interleave_loops(const ForNode *loop, const ForNode *a, const ForNode *b) {
  for (const ForNode *f : {a, b}) {
    if (f->kind != ForKind::Serial && f->kind != ForKind::Unrolled) {
      refuse_pipeline(loop,
                      "loop " + f->loop_var->name + " is " + for_kind_name(f->kind) + " (serial or unrolled needed)");
    }
  }
  auto body_at = [](const ForNode *f, const Expr &k) {
    return copy_with_fresh_vars(f->body, {{f->loop_var.get(), f->min + k}});
  };
  Var k(a->loop_var->name + ".pipelined", a->loop_var.type());
  if (same_expr(a->extent, b->extent)) {
    return ForNode::make(k, make_zero(k.type()), a->extent, ForKind::Serial,
                         BlockNode::make(body_at(a, k), body_at(b, k)));
  }
  const auto ea = as_const_int(a->extent), eb = as_const_int(b->extent);
  if (!ea || !eb) {
    std::ostringstream os;
    os << "its first loop " << a->loop_var->name << " runs " << a->extent << " times and its last loop "
       << b->loop_var->name << " " << b->extent << " times (the same, or constant, needed)";
    refuse_pipeline(loop, os.str());
  }
  const int64_t common = std::min(*ea, *eb);
  std::vector<Stmt> out;
  if (common > 0) {
    out.push_back(ForNode::make(k, make_zero(k.type()), make_const(k.type(), common), ForKind::Serial,
                                BlockNode::make(body_at(a, k), body_at(b, k))));
  }
  const ForNode *longer = *ea > *eb ? a : b;
  Var r(longer->loop_var->name + ".rest", longer->loop_var.type());
  out.push_back(ForNode::make(r, make_const(r.type(), common), make_const(r.type(), std::max(*ea, *eb) - common),
                              ForKind::Serial, body_at(longer, r)));
  return BlockNode::make(out);
}

// The pipelined form of a marked loop `for r: scopes { head...; S; tail... F }` (S the first serial
// loop of the body, F the last statement of the tail, through the scopes that wrap it):
//   scopes { head(min); S(min); for r: tail(r) with F(r) replaced by
//     if (r + 1 < end) { head(r + 1); S(r + 1) and F(r) in one loop } else F(r) }
Stmt pipeline(const ForNode *loop) {
  if (loop->kind != ForKind::Serial) {
    refuse_pipeline(loop, std::string("it is ") + for_kind_name(loop->kind) + " (a serial loop is needed)");
  }
  const VariableNode *r = loop->loop_var.get();
  // The scopes around the body move outside the loop: the next iteration's head writes into them.
  std::vector<Rewrap> outer;
  Stmt body = loop->body;
  for (Stmt inner; auto w = scope_wrapper(body, &inner); body = inner) {
    if (const auto *al = body.as<AllocateNode>()) {
      for (const Expr &e : al->extents) {
        if (arith::detail::uses_var(e, r))
          refuse_pipeline(loop, "the size of " + al->buffer_var->name + " depends on it");
      }
    }
    outer.push_back(*w);
  }
  std::vector<Stmt> stmts = flatten(body);
  size_t s_at = 0;
  // The first serial loop: a loop over the row (the vectorized or unrolled loops that may come
  // first initialize the statistics' accumulators).
  auto serial_loop = [](const Stmt &st) {
    const auto *f = st.as<ForNode>();
    return f && f->kind == ForKind::Serial;
  };
  while (s_at < stmts.size() && !serial_loop(stmts[s_at])) ++s_at;
  if (s_at + 1 >= stmts.size()) refuse_pipeline(loop, "its body has no serial loop followed by other statements");
  const std::vector<Stmt> head(stmts.begin(), stmts.begin() + static_cast<long>(s_at) + 1);
  const std::vector<Stmt> tail(stmts.begin() + static_cast<long>(s_at) + 1, stmts.end());
  // F: the last statement of the tail, through the scopes that wrap it.
  std::vector<std::pair<Rewrap, std::vector<Stmt>>> path;  // each scope and the statements before F in it
  std::vector<Stmt> level = tail;  // the body's statements before F (or the scope that holds it)
  Stmt last = level.back();
  level.pop_back();
  for (Stmt inner; auto w = scope_wrapper(last, &inner);) {
    std::vector<Stmt> in = flatten(inner);
    last = in.back();
    in.pop_back();
    path.emplace_back(*w, in);
  }
  const auto *f = last.as<ForNode>();
  if (!f) refuse_pipeline(loop, "the last statement of its body is not a loop");
  // The next iteration's head runs before this iteration's F, and its loop beside F's: legal when
  // they touch different buffers (but for reading the same ones).
  const Accesses h = accesses(BlockNode::make(head)), a = accesses(last);
  if (h.opaque || a.opaque)
    refuse_pipeline(loop, "a statement calls a function with effects or passes a buffer's handle");
  BufferSet h_uses = h.reads;
  h_uses.insert(h.writes.begin(), h.writes.end());
  if (intersects(a.writes, h_uses)) {
    refuse_pipeline(loop,
                    "its last loop writes " + names(a.writes, h_uses) + ", which the first loop's statements use");
  }
  if (intersects(h.writes, a.reads)) {
    refuse_pipeline(loop,
                    "the first loop's statements write " + names(h.writes, a.reads) + ", which its last loop reads");
  }
  const Expr end = loop->min + loop->extent;
  const Expr next = Expr(loop->loop_var) + make_const(loop->loop_var.type(), int64_t{1});
  // The next iteration's head and the interleaved loops.
  std::vector<Stmt> ahead;
  for (size_t i = 0; i + 1 < head.size(); ++i) ahead.push_back(copy_with_fresh_vars(head[i], {{r, next}}));
  const Stmt s_next = copy_with_fresh_vars(head.back(), {{r, next}});
  ahead.push_back(interleave_loops(loop, s_next.as<ForNode>(), f));
  Stmt replaced = IfThenElseNode::make(next < end, BlockNode::make(ahead), last);
  for (auto it = path.rbegin(); it != path.rend(); ++it) {
    std::vector<Stmt> v = it->second;
    v.push_back(replaced);
    replaced = it->first(BlockNode::make(v));
  }
  std::vector<Stmt> new_body = level;
  new_body.push_back(replaced);
  Stmt new_loop =
      ForNode::make(loop->loop_var, loop->min, loop->extent, loop->kind, BlockNode::make(new_body), loop->thread_tag);
  // The first iteration's head before the loop.
  std::vector<Stmt> first;
  for (const Stmt &s : head) first.push_back(copy_with_fresh_vars(s, {{r, loop->min}}));
  Stmt prologue = BlockNode::make(first);
  if (as_const_int(loop->extent).value_or(0) <= 0) prologue = IfThenElseNode::make(loop->min < end, prologue);
  Stmt out = BlockNode::make(prologue, new_loop);
  for (auto it = outer.rbegin(); it != outer.rend(); ++it) out = (*it)(out);
  return out;
}

class Pipeliner : public IRMutator {
 protected:
  using IRMutator::visit;
  Stmt visit(const AttrStmtNode *op, const Stmt &self) override {
    Stmt rebuilt = IRMutator::visit(op, self);
    const auto *at = rebuilt.as<AttrStmtNode>();
    if (!at || at->key != pipeline_key()) return rebuilt;
    const auto *loop = at->body.as<ForNode>();
    // A loop of one iteration is no loop by now (its variable a constant): nothing to pipeline.
    if (!loop) return at->body;
    return pipeline(loop);
  }
};

}  // namespace

Stmt pipeline_loops(const Stmt &s) {
  if (!has_marker(s, pipeline_key())) return s;
  return Pipeliner().mutate(s);
}

Stmt fuse_with_next_loops(const Stmt &s) {
  if (!has_marker(s, marker_key())) return s;
  Stmt out = Fuser().mutate(s);
  post_order_visit(out, [](const IRNode *n) {
    if (n->node_type == NodeType::AttrStmt && static_cast<const AttrStmtNode *>(n)->key == marker_key()) {
      const Stmt &body = static_cast<const AttrStmtNode *>(n)->body;
      if (!body.as<ForNode>()) throw InternalError("the fuse_with_next marker is not on a loop");
      refuse(body.as<ForNode>(), "no statement after it uses what it writes");
    }
  });
  return out;
}

}  // namespace kiln::pass
