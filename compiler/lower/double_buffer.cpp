#include "compiler/lower/double_buffer.h"

#include "compiler/arith/analyzer.h"
#include "compiler/ir/ir_visitor.h"
#include "compiler/ir/op.h"
#include "compiler/lower/inline.h"

namespace kiln::lower {

using namespace ir;

namespace {

// Offsets every access of one buffer by a copy index times the copy size.
class CopySelector : public IRMutator {
 public:
  CopySelector(const VariableNode *buf, Expr offset) : buf_(buf), offset_(std::move(offset)) {}
  using IRMutator::mutate;

 protected:
  Expr visit(const LoadNode *op, const Expr &self) override {
    Expr e = IRMutator::visit(op, self);
    const auto *l = e.as<LoadNode>();
    if (l->buffer_var.get() != buf_) return e;
    return LoadNode::make(l->type, l->buffer_var, l->index + cast(l->index.type(), offset_), l->predicate);
  }
  Stmt visit(const StoreNode *op, const Stmt &self) override {
    Stmt s = IRMutator::visit(op, self);
    const auto *st = s.as<StoreNode>();
    if (st->buffer_var.get() != buf_) return s;
    return StoreNode::make(st->buffer_var, st->value, st->index + cast(st->index.type(), offset_), st->predicate);
  }

 private:
  const VariableNode *buf_;
  Expr offset_;
};

bool writes(const Stmt &s, const VariableNode *buf) {
  bool w = false;
  post_order_visit(s, [&](const IRNode *n) {
    if (n->node_type == NodeType::Store && static_cast<const StoreNode *>(n)->buffer_var.get() == buf) w = true;
  });
  return w;
}

bool reads(const Stmt &s, const VariableNode *buf) {
  bool r = false;
  post_order_visit(s, [&](const IRNode *n) {
    if (n->node_type == NodeType::Load && static_cast<const LoadNode *>(n)->buffer_var.get() == buf) r = true;
  });
  return r;
}

class DoubleBufferInjector : public IRMutator {
 public:
  using IRMutator::mutate;

 protected:
  Stmt visit(const ForNode *op, const Stmt &self) override {
    Stmt body = mutate(op->body);
    // The loop body must be: allocate B { attr double_buffer { producers of B; consumers } }, where
    // the consumers may again be one such allocation (several stages double-buffered at one loop).
    std::vector<const AllocateNode *> allocs;
    std::vector<Stmt> producer, consumer;
    Stmt cur = body;
    while (op->kind != ForKind::Vectorized) {
      const auto *alloc = cur.as<AllocateNode>();
      const AttrStmtNode *mark = alloc ? alloc->body.as<AttrStmtNode>() : nullptr;
      if (!mark || mark->key != attr::kDoubleBuffer || alloc->extents.size() != 1 || !as_const_int(alloc->extents[0])) {
        break;
      }
      const VariableNode *buf = alloc->buffer_var.get();
      const auto *block = mark->body.as<BlockNode>();
      if (!block) break;
      size_t split = 0;
      while (split < block->stmts.size() && writes(block->stmts[split], buf) && !reads(block->stmts[split], buf)) {
        ++split;
      }
      bool reads_earlier = false;  // a producer that reads a buffer of an enclosing level
      for (size_t k = 0; k < split; ++k) {
        for (const AllocateNode *a : allocs)
          reads_earlier = reads_earlier || reads(block->stmts[k], a->buffer_var.get());
      }
      if (split == 0 || split == block->stmts.size() || reads_earlier) break;
      allocs.push_back(alloc);
      producer.insert(producer.end(), block->stmts.begin(), block->stmts.begin() + static_cast<std::ptrdiff_t>(split));
      consumer.assign(block->stmts.begin() + static_cast<std::ptrdiff_t>(split), block->stmts.end());
      cur = consumer.size() == 1 ? consumer[0] : Stmt();
      if (!cur.defined()) break;
    }
    if (allocs.empty()) {
      // Not a produce-then-consume loop body: a single buffer (the mark is removed afterwards).
      return body.same_as(op->body) ? self
                                    : ForNode::make(op->loop_var, op->min, op->extent, op->kind, body, op->thread_tag);
    }
    Var i = op->loop_var;
    Expr end = op->min + op->extent;
    auto select = [&](Stmt st, Expr iter) {
      for (const AllocateNode *a : allocs) {
        st = CopySelector(a->buffer_var.get(), floormod(iter - op->min, 2) * a->extents[0]).mutate(st);
      }
      return st;
    };
    auto produce_at = [&](Expr iter, bool fresh) {
      VarMap m{{i.get(), iter}};
      Stmt p = fresh ? copy_with_fresh_vars(BlockNode::make(producer), m) : substitute(BlockNode::make(producer), m);
      return select(p, iter);
    };
    Stmt prologue = produce_at(op->min, true);
    Stmt next = IfThenElseNode::make(i + 1 < end, produce_at(i + 1, false));
    Stmt consume = select(BlockNode::make(consumer), i);
    Stmt loop = ForNode::make(i, op->min, op->extent, op->kind, BlockNode::make(next, consume), op->thread_tag);
    Stmt out = BlockNode::make(prologue, loop);
    for (auto it = allocs.rbegin(); it != allocs.rend(); ++it) {
      const AllocateNode *a = *it;
      out = AllocateNode::make(a->buffer_var, a->dtype, {arith::simplify(a->extents[0] * 2)}, a->scope, out);
    }
    return out;
  }

  Stmt visit(const AttrStmtNode *op, const Stmt &self) override {
    // A double-buffer mark that no loop claimed is dropped by the loop visitor or kept harmless.
    return IRMutator::visit(op, self);
  }
};

// Marks not directly inside a loop body have no effect.
class MarkRemover : public IRMutator {
 public:
  using IRMutator::mutate;

 protected:
  Stmt visit(const AttrStmtNode *op, const Stmt &self) override {
    if (op->key == attr::kDoubleBuffer) return mutate(op->body);
    return IRMutator::visit(op, self);
  }
};

}  // namespace

Stmt inject_double_buffer(const Stmt &s) {
  Stmt r = DoubleBufferInjector().mutate(s);
  return MarkRemover().mutate(r);
}

}  // namespace kiln::lower
