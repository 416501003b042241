#include "compiler/lower/inline.h"

#include "compiler/ir/ir_visitor.h"

namespace kiln::lower {

using namespace ir;

namespace {

// Replaces reads of inlined operations by their bodies.
class Inliner : public IRMutator {
 public:
  Inliner(const te::Schedule &sch, const BodyMap &bodies) : sch_(sch), bodies_(bodies) {}
  using IRMutator::mutate;

 protected:
  Expr visit(const ProducerLoadNode *op, const Expr &self) override {
    Expr e = IRMutator::visit(op, self);
    const auto *l = e.as<ProducerLoadNode>();
    te::Stage st = sch_.stage_of(te::operation_of(l->producer.get()));
    if (!st.defined() || st->attach_type != te::AttachType::Inline) return e;
    const auto *c = dynamic_cast<const te::ComputeOpNode *>(st->op.get());
    auto it = bodies_.find(st->op.get());
    KILN_CHECK(c && it != bodies_.end(), "inlined stage ", l->producer->producer_name(), " has no body");
    std::unordered_map<const VariableNode *, Expr> m;
    for (size_t i = 0; i < c->axis.size(); ++i) m[c->axis[i]->var.get()] = l->indices[i];
    return substitute(it->second.at(l->value_index), m);
  }

 private:
  const te::Schedule &sch_;
  const BodyMap &bodies_;
};

}  // namespace

BodyMap inline_bodies(const te::Schedule &sch) {
  BodyMap bodies;
  // Stages are ordered producers first, so every inlined producer is ready before its readers.
  for (const auto &s : sch.stages()) {
    const auto *c = dynamic_cast<const te::ComputeOpNode *>(s->op.get());
    if (!c) continue;
    Inliner inl(sch, bodies);
    std::vector<Expr> b;
    for (const auto &e : c->body) b.push_back(inl.mutate(e));
    bodies[s->op.get()] = std::move(b);
  }
  return bodies;
}

}  // namespace kiln::lower
