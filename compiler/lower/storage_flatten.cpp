#include "compiler/lower/storage_flatten.h"

#include <algorithm>
#include <unordered_map>

#include "compiler/arith/analyzer.h"
#include "compiler/ir/ir_visitor.h"
#include "compiler/ir/op.h"

namespace kiln::lower {

using namespace ir;

namespace {

// Replaces the variables of a region buffer (data pointer, offset, strides) by the real ones.
class RegionRebinder : public IRMutator {
 public:
  RegionRebinder(const VariableNode *data, Var real, std::unordered_map<const VariableNode *, Expr> values)
      : data_(data), real_(std::move(real)), values_(std::move(values)) {}
  using IRMutator::mutate;

 protected:
  Expr visit(const VariableNode *op, const Expr &self) override {
    if (op == data_) return real_;
    auto it = values_.find(op);
    return it == values_.end() ? self : it->second;
  }
  Expr visit(const LoadNode *op, const Expr &self) override {
    Expr e = IRMutator::visit(op, self);
    const auto *l = e.as<LoadNode>();
    if (l->buffer_var.get() != data_) return e;
    return LoadNode::make(l->type, real_, l->index, l->predicate);
  }
  Stmt visit(const StoreNode *op, const Stmt &self) override {
    Stmt s = IRMutator::visit(op, self);
    const auto *st = s.as<StoreNode>();
    if (st->buffer_var.get() != data_) return s;
    return StoreNode::make(real_, st->value, st->index, st->predicate);
  }

 private:
  const VariableNode *data_;
  Var real_;
  std::unordered_map<const VariableNode *, Expr> values_;
};

struct Entry {
  Buffer buffer;
  std::vector<Expr> mins;  // region minimum per dimension (zero for arguments)
};

class Flattener : public IRMutator {
 public:
  Flattener(const BufferBinds &binds, const te::Schedule &sch) : binds_(binds), sch_(sch) {}
  using IRMutator::mutate;

 protected:
  Stmt visit(const ForNode *op, const Stmt &self) override {
    an_.bind(op->loop_var, Range(op->min, op->extent));
    Stmt r = IRMutator::visit(op, self);
    an_.unbind(op->loop_var);
    return r;
  }

  Stmt visit(const ProducerRealizeNode *op, const Stmt &self) override {
    (void)self;
    auto key = std::make_pair(te::operation_of(op->producer.get()), op->value_index);
    auto bit = binds_.find(key);
    if (bit != binds_.end()) {
      Entry e{bit->second, {}};
      for (size_t i = 0; i < e.buffer.shape.size(); ++i) e.mins.push_back(make_zero(Int(32)));
      auto saved = entries_.find(key) != entries_.end() ? std::optional<Entry>(entries_.at(key)) : std::nullopt;
      entries_[key] = e;
      Stmt body = mutate(op->body);
      if (saved)
        entries_[key] = *saved;
      else
        entries_.erase(key);
      return body;
    }
    // An intermediate: allocate its region.
    std::string name = producer_output_name(*op->producer, op->value_index);
    std::vector<Expr> shape, mins;
    for (const auto &r : op->bounds) {
      Expr ext = arith::simplify(r.extent);
      if (!as_const_int(ext)) {
        int64_t ub = upper_bound(ext);
        // A bound at the limit of int32 only restates the type, not the region.
        if (ub > 0 && ub < (int64_t{1} << 30)) ext = make_const(Int(32), ub);
      }
      shape.push_back(ext);
      mins.push_back(r.min);
    }
    Buffer buf = make_buffer(name, op->producer->output_dtype(op->value_index), shape, op->scope);
    apply_storage_align(key.first, &buf);
    Entry e{buf, mins};
    entries_[key] = e;
    Stmt body = mutate(op->body);
    entries_.erase(key);
    Expr size = shape.empty() ? make_one(Int(32)) : arith::simplify(buf.strides[0] * shape[0]);
    return AllocateNode::make(buf.data, buf.dtype, {size}, op->scope, body);
  }

  Stmt visit(const AttrStmtNode *op, const Stmt &self) override {
    if (op->key == attr::kDoubleBuffer) {
      // The mark moves inside the allocation of the realized buffer, naming it.
      Stmt body = mutate(op->body);
      if (const auto *a = body.as<AllocateNode>()) {
        return AllocateNode::make(a->buffer_var, a->dtype, a->extents, a->scope,
                                  AttrStmtNode::make(a->buffer_var, attr::kDoubleBuffer, op->value, a->body));
      }
      return body;
    }
    if (op->key != attr::kBufferBindScope) return IRMutator::visit(op, self);
    const auto *region = op->node.as<ProducerLoadNode>();
    const auto *bind = op->value.as<CallNode>();
    KILN_CHECK(region && bind && bind->args.size() >= 2, "malformed buffer_bind_scope");
    const Entry &e = lookup(region->producer.get(), region->value_index);
    std::vector<Expr> begin;
    mutate_exprs(region->indices, &begin);
    size_t rank = bind->args.size() - 2;
    std::unordered_map<const VariableNode *, Expr> values;
    values[bind->args[1].as<VariableNode>()] = arith::simplify(offset(e, begin));
    size_t nd = e.buffer.strides.size();
    KILN_CHECK(rank <= nd, "region buffer of higher rank than ", e.buffer.name);
    for (size_t d = 0; d < rank; ++d) values[bind->args[2 + d].as<VariableNode>()] = e.buffer.strides[nd - rank + d];
    Stmt body = mutate(op->body);
    return RegionRebinder(bind->args[0].as<VariableNode>(), e.buffer.data, std::move(values)).mutate(body);
  }

  Stmt visit(const ProducerStoreNode *op, const Stmt &self) override {
    (void)self;
    const Entry &e = lookup(op->producer.get(), op->value_index);
    Expr v = mutate(op->value);
    std::vector<Expr> idx;
    mutate_exprs(op->indices, &idx);
    return StoreNode::make(e.buffer.data, cast(e.buffer.dtype, v), offset(e, idx));
  }

  Expr visit(const ProducerLoadNode *op, const Expr &self) override {
    (void)self;
    const Entry &e = lookup(op->producer.get(), op->value_index);
    std::vector<Expr> idx;
    mutate_exprs(op->indices, &idx);
    return LoadNode::make(e.buffer.dtype, e.buffer.data, offset(e, idx));
  }

 private:
  const Entry &lookup(const Producer *producer, int vi) {
    const te::OperationNode *op = te::operation_of(producer);
    auto it = entries_.find({op, vi});
    if (it != entries_.end()) return it->second;
    // Arguments that are read but never realized (placeholders).
    auto bit = binds_.find({op, vi});
    if (bit != binds_.end()) {
      Entry e{bit->second, {}};
      for (size_t i = 0; i < e.buffer.shape.size(); ++i) e.mins.push_back(make_zero(Int(32)));
      return entries_.emplace(std::make_pair(op, vi), e).first->second;
    }
    throw ScheduleError("tensor " + op->name +
                        " is read but is neither an argument nor computed here: pass it in the argument list");
  }

  Expr offset(const Entry &e, const std::vector<Expr> &idx) {
    KILN_CHECK(idx.size() == e.buffer.shape.size(), "access to ", e.buffer.name, " with ", idx.size(),
               " indices, expected ", e.buffer.shape.size());
    std::vector<Expr> rel;
    for (size_t i = 0; i < idx.size(); ++i) {
      Expr x = idx[i].type() == Int(32) ? idx[i] : cast(Int(32), idx[i]);
      rel.push_back(is_zero(e.mins[i]) ? x : x - e.mins[i]);
    }
    return e.buffer.offset_of(rel);
  }

  // A constant upper bound of an extent such as min(x*4 + 3, n - 1) - x*4 + 1 (the region of a
  // stage computed at a tiled loop), pushing subtractions into min/max so that terms cancel.
  int64_t upper_bound(const Expr &e, int depth = 0) {
    constexpr int64_t kInf = arith::ConstIntBound::kPosInf;
    int64_t direct = an_.const_int_bound(an_.simplify(e)).max_value;
    if (depth > 8) return direct;
    int64_t best = direct;
    auto sub_ub = [&](const Expr &minuend, const Expr &sub, int64_t add) -> int64_t {
      if (const auto *m = minuend.as<MinNode>()) {
        int64_t a = upper_bound(m->a - sub + make_const(sub.type(), add), depth + 1);
        int64_t b = upper_bound(m->b - sub + make_const(sub.type(), add), depth + 1);
        return std::min(a, b);
      }
      if (const auto *m = minuend.as<MaxNode>()) {
        int64_t a = upper_bound(m->a - sub + make_const(sub.type(), add), depth + 1);
        int64_t b = upper_bound(m->b - sub + make_const(sub.type(), add), depth + 1);
        return (a == kInf || b == kInf) ? kInf : std::max(a, b);
      }
      return kInf;
    };
    Expr x = e;
    int64_t add = 0;
    if (const auto *a = x.as<AddNode>()) {
      if (auto c = as_const_int(a->b)) {
        add = *c;
        x = a->a;
      }
    }
    if (x.as<SubNode>()) {
      // (min(a, b) - s1 - s2 ...) + add: gather the subtrahends.
      Expr subtrahend;
      while (const auto *s = x.as<SubNode>()) {
        subtrahend = subtrahend.defined() ? s->b + subtrahend : s->b;
        x = s->a;
      }
      best = std::min(best, sub_ub(x, subtrahend, add));
    }
    if (const auto *m = e.as<MinNode>())
      best = std::min({best, upper_bound(m->a, depth + 1), upper_bound(m->b, depth + 1)});
    return best;
  }

  void apply_storage_align(const te::OperationNode *op, Buffer *buf) {
    te::Stage st = sch_.stage_of(op);
    if (!st.defined() || st->storage_align.empty()) return;
    // Recompute strides innermost first, padding a dimension's stride to factor*k + offset.
    size_t nd = buf->shape.size();
    Expr stride = make_one(Int(32));
    for (size_t d = nd; d-- > 0;) {
      for (const auto &a : st->storage_align) {
        if (static_cast<size_t>(a.axis) == d) {
          stride = arith::simplify(
              stride +
              floormod(make_const(Int(32), int64_t{a.factor + a.offset}) - floormod(stride, a.factor), a.factor));
        }
      }
      buf->strides[d] = stride;
      stride = arith::simplify(stride * buf->shape[d]);
    }
  }

  const BufferBinds &binds_;
  const te::Schedule &sch_;
  std::map<std::pair<const te::OperationNode *, int>, Entry> entries_;
  arith::Analyzer an_;
};

}  // namespace

Stmt storage_flatten(const Stmt &s, const BufferBinds &binds, const te::Schedule &sch) {
  return Flattener(binds, sch).mutate(s);
}

}  // namespace kiln::lower
