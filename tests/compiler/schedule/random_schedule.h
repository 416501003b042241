#pragma once
// Random legal schedules for property tests. Every step taken is logged so that a failure can be
// read and replayed from its seed.
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "compiler/ir/op.h"
#include "compiler/te/schedule.h"

namespace kiln::testing {

using ir::IterVar;

class RandomScheduler {
 public:
  explicit RandomScheduler(uint64_t seed) : rng_(seed) {}

  // Applies random primitives to every computed stage of `s`, consumers before producers.
  void apply(te::Schedule &s) {
    std::vector<te::StageNode *> stages;
    for (const auto &st : s.stages()) stages.push_back(st.get());
    for (size_t i = stages.size(); i-- > 0;) {
      te::Stage st(stages[i]);
      if (st->is_placeholder()) continue;
      place(s, st, stages, i);
      if (st->attach_type == te::AttachType::Inline) continue;
      transform(st);
      annotate(st);
    }
  }

  const std::string &log() const { return log_; }

 private:
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }

  void note(const te::Stage &st, const std::string &what) { log_ += st.name() + "." + what + "; "; }

  static bool reads(const te::OperationNode *consumer, const te::OperationNode *producer) {
    for (const auto &t : consumer->input_tensors()) {
      if (t.op().get() == producer) return true;
    }
    return false;
  }

  void place(te::Schedule &s, te::Stage st, const std::vector<te::StageNode *> &stages, size_t index) {
    if (st->is_output) return;
    const auto *c = dynamic_cast<const te::ComputeOpNode *>(st->op.get());
    if (!c->is_reduction() && chance(0.3)) {
      st.compute_inline();
      note(st, "compute_inline()");
      return;
    }
    if (chance(0.5)) {
      std::vector<te::StageNode *> consumers;
      for (size_t j = index + 1; j < stages.size(); ++j) {
        if (stages[j]->attach_type != te::AttachType::Inline && reads(stages[j]->op.get(), st->op.get())) {
          consumers.push_back(stages[j]);
        }
      }
      if (consumers.size() == 1) {  // attaching into one of several consumers would starve the others
        te::Stage target(consumers[0]);
        IterVar iv = target->leaf_iter_vars[pick(target->leaf_iter_vars.size())];
        st.compute_at(target, iv);
        note(st, "compute_at(" + target.name() + ", " + iv->var.name() + ")");
        return;
      }
    }
    (void)s;
  }

  void transform(te::Stage st) {
    int splits = static_cast<int>(pick(3));
    static const int factors[] = {2, 3, 4, 5, 8, 16};
    for (int k = 0; k < splits; ++k) {
      auto leaves = st->leaf_iter_vars;
      if (leaves.empty()) return;
      IterVar iv = leaves[pick(leaves.size())];
      int f = factors[pick(6)];
      IterVar o, i;
      if (chance(0.2)) {
        st.split_nparts(iv, f, &o, &i);
        note(st, "split_nparts(" + iv->var.name() + ", " + std::to_string(f) + ")");
      } else {
        st.split(iv, f, &o, &i);
        note(st, "split(" + iv->var.name() + ", " + std::to_string(f) + ")");
      }
    }
    if (chance(0.3)) {
      auto leaves = st->leaf_iter_vars;
      if (leaves.size() >= 2) {
        size_t p = pick(leaves.size() - 1);
        bool r0 = leaves[p]->iter_type == ir::IterVarType::CommReduce;
        bool r1 = leaves[p + 1]->iter_type == ir::IterVarType::CommReduce;
        if (r0 == r1) {
          IterVar f;
          st.fuse(leaves[p], leaves[p + 1], &f);
          note(st, "fuse(" + leaves[p]->var.name() + ", " + leaves[p + 1]->var.name() + ")");
        }
      }
    }
    if (chance(0.5)) {
      auto leaves = st->leaf_iter_vars;
      std::shuffle(leaves.begin(), leaves.end(), rng_);
      st.reorder(leaves);
      std::string names;
      for (const auto &l : leaves) names += l->var.name() + " ";
      note(st, "reorder(" + names + ")");
    }
  }

  void annotate(te::Stage st) {
    auto leaves = st->leaf_iter_vars;
    if (leaves.empty()) return;
    const IterVar &inner = leaves.back();
    if (inner->iter_type != ir::IterVarType::CommReduce && chance(0.3)) {
      st.vectorize(inner);
      note(st, "vectorize(" + inner->var.name() + ")");
    }
    if (leaves.size() > 1 && leaves[0]->iter_type != ir::IterVarType::CommReduce && chance(0.3)) {
      st.parallel(leaves[0]);
      note(st, "parallel(" + leaves[0]->var.name() + ")");
    }
    if (chance(0.2)) {
      IterVar iv = leaves[pick(leaves.size())];
      const auto *a = st->attr(iv);
      if (!a || a->for_kind == ir::ForKind::Serial) {
        st.unroll(iv);
        note(st, "unroll(" + iv->var.name() + ")");
      }
    }
  }

  std::mt19937_64 rng_;
  std::string log_;
};

}  // namespace kiln::testing
