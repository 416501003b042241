#include <algorithm>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "compiler/arith/analyzer.h"
#include "compiler/ir/ir_visitor.h"
#include "compiler/ir/op.h"
#include "compiler/pass/passes.h"

namespace kiln::pass {

namespace {

using namespace ir;

// Points loads and stores of some buffers at other buffers.
class RemapBuffers : public IRMutator {
 public:
  explicit RemapBuffers(const std::unordered_map<const VariableNode *, Var> &map) : map_(map) {}

 protected:
  using IRMutator::visit;
  Var remap(const Var &v) const {
    auto it = map_.find(v.get());
    return it == map_.end() ? v : it->second;
  }
  Expr visit(const LoadNode *op, const Expr &self) override {
    Var buf = remap(op->buffer_var);
    Expr index = mutate(op->index), pred = mutate(op->predicate);
    if (buf.same_as(op->buffer_var) && index.same_as(op->index) && pred.same_as(op->predicate)) return self;
    return LoadNode::make(op->type, buf, index, pred);
  }
  Stmt visit(const StoreNode *op, const Stmt &self) override {
    Var buf = remap(op->buffer_var);
    Expr value = mutate(op->value), index = mutate(op->index), pred = mutate(op->predicate);
    if (buf.same_as(op->buffer_var) && value.same_as(op->value) && index.same_as(op->index) &&
        pred.same_as(op->predicate)) {
      return self;
    }
    return StoreNode::make(buf, value, index, pred);
  }

 private:
  const std::unordered_map<const VariableNode *, Var> &map_;
};

// Number of elements of an allocation with constant extents in a scope whose buffers may share
// memory ("local" or "global"); nullopt otherwise.
std::optional<int64_t> reusable_size(const AllocateNode *a) {
  if (a->scope != "local" && a->scope != "global") return std::nullopt;
  int64_t n = 1;
  for (const auto &e : a->extents) {
    auto c = as_const_int(e);
    if (!c || *c <= 0) return std::nullopt;
    n *= *c;
  }
  return n;
}

// A constant scalar index or a ramp with a constant base and stride.
// (Unrolled loops leave indices such as 0 * 16 + 8 to the simplifier that runs later.)
bool constant_index(const Expr &index) {
  if (as_const_int(index)) return true;
  const auto *r = index.as<RampNode>();
  if (r) return as_const_int(arith::simplify(r->base)) && as_const_int(arith::simplify(r->stride));
  return as_const_int(arith::simplify(index)).has_value();
}

// A sequence of statements at one loop level, with the allocations of constant size that enclose
// them (seen through blocks and nested allocations).
struct Region {
  std::vector<const AllocateNode *> allocs;
  std::vector<Stmt> seq;

  void flatten(const Stmt &s) {
    if (const auto *a = s.as<AllocateNode>(); a && reusable_size(a)) {
      allocs.push_back(a);
      flatten(a->body);
    } else if (const auto *b = s.as<BlockNode>()) {
      for (const auto &c : b->stmts) flatten(c);
    } else {
      seq.push_back(s);
    }
  }
};

// An allocation that several buffers with disjoint lifetimes share.
struct Slot {
  const AllocateNode *alloc;
  int64_t size;
  int last_use;
  bool grown = false;
};

class StorageRewriter : public IRMutator {
 protected:
  using IRMutator::visit;
  Stmt visit(const AllocateNode *op, const Stmt &self) override {
    if (auto s = rewrite(self)) return *s;
    return IRMutator::visit(op, self);
  }
  Stmt visit(const BlockNode *op, const Stmt &self) override {
    if (auto s = rewrite(self)) return *s;
    return IRMutator::visit(op, self);
  }

 private:
  // Lets allocations of a region whose lifetimes (first to last statement of the sequence that
  // uses them) do not overlap share one allocation of the largest size, per scope and dtype.
  std::optional<Stmt> rewrite(const Stmt &root) {
    Region region;
    region.flatten(root);
    if (region.allocs.size() < 2) return std::nullopt;
    std::unordered_map<const VariableNode *, const AllocateNode *> candidates;
    for (const auto *a : region.allocs) candidates[a->buffer_var.get()] = a;
    // A buffer whose variable is used other than by loads and stores (passed to a call, named by
    // an attribute) may be read anywhere: it keeps its own memory. Moving allocations to the top
    // of the region needs each buffer variable to be allocated once in it.
    std::unordered_set<const VariableNode *> allocated;
    bool reallocated = false;
    post_order_visit(root, [&](const IRNode *n) {
      if (n->node_type == NodeType::Allocate) {
        reallocated = reallocated || !allocated.insert(static_cast<const AllocateNode *>(n)->buffer_var.get()).second;
      }
      if (n->node_type == NodeType::Variable) candidates.erase(static_cast<const VariableNode *>(n));
      if (n->node_type == NodeType::AttrStmt) {
        candidates.erase(static_cast<const AttrStmtNode *>(n)->node.as<VariableNode>());
      }
    });
    if (reallocated) return std::nullopt;
    // A buffer read and written only at constant indices (the partial results of a reduction
    // tree, a small accumulator) is a register candidate: LLVM keeps it in registers unless it
    // shares memory with another buffer, whose accesses of other widths or at variable indices
    // would keep both in memory, extracted and inserted lane by lane. It keeps its own.
    std::unordered_set<const VariableNode *> variable_index;
    post_order_visit(root, [&](const IRNode *n) {
      if (n->node_type == NodeType::Load) {
        const auto *l = static_cast<const LoadNode *>(n);
        if (!constant_index(l->index)) variable_index.insert(l->buffer_var.get());
      }
      if (n->node_type == NodeType::Store) {
        const auto *st = static_cast<const StoreNode *>(n);
        if (!constant_index(st->index)) variable_index.insert(st->buffer_var.get());
      }
    });
    for (auto it = candidates.begin(); it != candidates.end();) {
      it = variable_index.count(it->first) ? std::next(it) : candidates.erase(it);
    }
    std::unordered_map<const VariableNode *, std::pair<int, int>> lifetime;
    for (int i = 0; i < static_cast<int>(region.seq.size()); ++i) {
      post_order_visit(region.seq[i], [&](const IRNode *n) {
        const VariableNode *buf = nullptr;
        if (n->node_type == NodeType::Load) buf = static_cast<const LoadNode *>(n)->buffer_var.get();
        if (n->node_type == NodeType::Store) buf = static_cast<const StoreNode *>(n)->buffer_var.get();
        if (!buf || !candidates.count(buf)) return;
        auto [it, inserted] = lifetime.emplace(buf, std::make_pair(i, i));
        if (!inserted) it->second.second = i;
      });
    }
    std::vector<const AllocateNode *> order;
    for (const auto *a : region.allocs) {
      if (lifetime.count(a->buffer_var.get())) order.push_back(a);
    }
    std::stable_sort(order.begin(), order.end(), [&](const AllocateNode *x, const AllocateNode *y) {
      return lifetime[x->buffer_var.get()].first < lifetime[y->buffer_var.get()].first;
    });

    std::vector<Slot> slots;
    std::unordered_map<const VariableNode *, Var> remap;
    for (const auto *a : order) {
      auto [first, last] = lifetime[a->buffer_var.get()];
      int64_t size = *reusable_size(a);
      Slot *slot = nullptr;
      for (auto &s : slots) {
        if (s.alloc->dtype == a->dtype && s.alloc->scope == a->scope && s.last_use < first) {
          slot = &s;
          break;
        }
      }
      if (!slot) {
        slots.push_back({a, size, last});
        continue;
      }
      remap[a->buffer_var.get()] = slot->alloc->buffer_var;
      slot->last_use = last;
      if (size > slot->size) slot->size = size, slot->grown = true;
    }
    if (remap.empty()) return std::nullopt;

    std::vector<Stmt> seq;
    RemapBuffers remapper(remap);
    for (const auto &s : region.seq) seq.push_back(mutate(remapper.mutate(s)));
    Stmt body = BlockNode::make(std::move(seq));
    std::unordered_map<const AllocateNode *, const Slot *> slot_of;
    for (const auto &s : slots) slot_of[s.alloc] = &s;
    for (auto it = region.allocs.rbegin(); it != region.allocs.rend(); ++it) {
      const AllocateNode *a = *it;
      if (remap.count(a->buffer_var.get())) continue;
      auto s = slot_of.find(a);
      std::vector<Expr> extents = a->extents;
      if (s != slot_of.end() && s->second->grown) extents = {make_const(Int(32), s->second->size)};
      body = AllocateNode::make(a->buffer_var, a->dtype, std::move(extents), a->scope, body);
    }
    return body;
  }
};

}  // namespace

Stmt storage_rewrite(const Stmt &s) { return StorageRewriter().mutate(s); }

}  // namespace kiln::pass
