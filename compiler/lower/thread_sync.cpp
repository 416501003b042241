#include "compiler/lower/thread_sync.h"

#include <algorithm>
#include <set>
#include <unordered_set>

#include "compiler/ir/ir_visitor.h"
#include "compiler/ir/op.h"

namespace kiln::lower {

using namespace ir;

namespace {

// Shared allocations move out of the thread loops of their block: one buffer per block, made
// before any thread starts.
class SharedHoister : public IRMutator {
 public:
  using IRMutator::mutate;

 protected:
  Stmt visit(const ForNode *op, const Stmt &self) override {
    bool is_thread = op->kind == ForKind::ThreadBinding && op->thread_tag.rfind("threadIdx", 0) == 0;
    if (!is_thread || depth_ > 0) {
      if (is_thread) ++depth_;
      Stmt r = IRMutator::visit(op, self);
      if (is_thread) --depth_;
      return r;
    }
    ++depth_;
    std::vector<const AllocateNode *> saved;
    saved.swap(lifted_);
    Stmt body = mutate(op->body);
    std::vector<const AllocateNode *> mine;
    mine.swap(lifted_);
    lifted_.swap(saved);
    --depth_;
    Stmt r = body.same_as(op->body) ? self
                                    : ForNode::make(op->loop_var, op->min, op->extent, op->kind, body, op->thread_tag);
    for (auto it = mine.rbegin(); it != mine.rend(); ++it) {
      r = AllocateNode::make((*it)->buffer_var, (*it)->dtype, (*it)->extents, (*it)->scope, r);
    }
    return r;
  }

  Stmt visit(const AllocateNode *op, const Stmt &self) override {
    if (depth_ == 0 || op->scope != "shared") return IRMutator::visit(op, self);
    for (const auto &e : op->extents) {
      if (!as_const_int(e)) {
        throw ScheduleError("shared buffer " + op->buffer_var.name() +
                            " has a size that varies between threads; give it a constant size");
      }
    }
    lifted_.push_back(op);
    return mutate(op->body);
  }

 private:
  int depth_ = 0;
  std::vector<const AllocateNode *> lifted_;
};

struct Access {
  std::set<const VariableNode *> reads, writes;
};

Access accesses(const Stmt &s, const std::unordered_set<const VariableNode *> &shared) {
  Access a;
  post_order_visit(s, [&](const IRNode *n) {
    if (n->node_type == NodeType::Load) {
      const auto *l = static_cast<const LoadNode *>(n);
      if (shared.count(l->buffer_var.get())) a.reads.insert(l->buffer_var.get());
    } else if (n->node_type == NodeType::Store) {
      const auto *st = static_cast<const StoreNode *>(n);
      if (shared.count(st->buffer_var.get())) a.writes.insert(st->buffer_var.get());
    }
  });
  return a;
}

bool intersects(const std::set<const VariableNode *> &a, const std::set<const VariableNode *> &b) {
  for (const auto *x : a) {
    if (b.count(x)) return true;
  }
  return false;
}

Stmt barrier() {
  return EvaluateNode::make(CallNode::make(Int(32), intrinsic::kSyncThreads, {}, CallNode::Kind::Intrinsic));
}

// Inserts barriers in statement sequences inside thread loops: before a statement that reads
// (or writes) shared memory written (or read) by an earlier one since the last barrier, and at the
// top of a loop body whose iterations write shared memory that an earlier iteration read.
class BarrierInserter : public IRMutator {
 public:
  using IRMutator::mutate;

 protected:
  Stmt visit(const AllocateNode *op, const Stmt &self) override {
    if (op->scope == "shared") shared_.insert(op->buffer_var.get());
    return IRMutator::visit(op, self);
  }

  Stmt visit(const ForNode *op, const Stmt &self) override {
    bool thread = op->kind == ForKind::ThreadBinding && op->thread_tag.rfind("threadIdx", 0) == 0;
    if (thread) ++in_threads_;
    Stmt r = IRMutator::visit(op, self);
    if (thread) --in_threads_;
    if (in_threads_ > 0 && !thread && !shared_.empty()) {
      const auto *f = r.as<ForNode>();
      Access a = accesses(f->body, shared_);
      if (intersects(a.writes, a.reads)) {
        // The next iteration overwrites what this one read.
        Stmt body = BlockNode::make(barrier(), f->body);
        return ForNode::make(f->loop_var, f->min, f->extent, f->kind, body, f->thread_tag);
      }
    }
    return r;
  }

  Stmt visit(const BlockNode *op, const Stmt &self) override {
    Stmt m = IRMutator::visit(op, self);
    if (in_threads_ == 0 || shared_.empty()) return m;
    const auto *b = m.as<BlockNode>();
    if (!b) return m;
    std::vector<Stmt> out;
    Access pending;
    for (const auto &s : b->stmts) {
      Access a = accesses(s, shared_);
      bool hazard = intersects(a.reads, pending.writes) || intersects(a.writes, pending.reads) ||
                    intersects(a.writes, pending.writes);
      if (hazard) {
        out.push_back(barrier());
        pending = Access();
      }
      pending.reads.insert(a.reads.begin(), a.reads.end());
      pending.writes.insert(a.writes.begin(), a.writes.end());
      out.push_back(s);
    }
    if (out.size() == b->stmts.size()) return m;
    return BlockNode::make(out);
  }

 private:
  int in_threads_ = 0;
  std::unordered_set<const VariableNode *> shared_;
};

}  // namespace

Stmt thread_sync(const Stmt &s) {
  Stmt r = SharedHoister().mutate(s);
  return BarrierInserter().mutate(r);
}

}  // namespace kiln::lower
