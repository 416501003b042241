#include "compiler/autotune/apply.h"

#include <string>

namespace kiln::autotune {

std::vector<ir::IterVar> apply_split(te::Stage stage, const ir::IterVar &axis, const std::vector<int64_t> &sizes) {
  if (!stage.defined()) throw ScheduleError("apply_split on an undefined stage");
  if (sizes.empty()) throw ScheduleError("in stage " + stage.name() + ", a split into no loops");
  std::vector<ir::IterVar> loops;
  ir::IterVar rest = axis;
  for (size_t i = 1; i < sizes.size(); ++i) {
    int64_t factor = 1;
    for (size_t j = i; j < sizes.size(); ++j) factor *= sizes[j];
    if (factor < 1 || factor > INT32_MAX) {
      throw ScheduleError(
          kiln::detail::concat("in stage ", stage.name(), ", split factor ", factor, " is out of range"));
    }
    ir::IterVar outer, inner;
    stage.split(rest, static_cast<int>(factor), &outer, &inner);
    loops.push_back(outer);
    rest = inner;
  }
  loops.push_back(rest);
  return loops;
}

void apply_reorder(te::Stage stage, const std::vector<ir::IterVar> &axes, const std::vector<int> &perm) {
  if (!stage.defined()) throw ScheduleError("apply_reorder on an undefined stage");
  if (perm.size() != axes.size()) {
    throw ScheduleError(kiln::detail::concat("in stage ", stage.name(), ", a reorder of ", axes.size(), " axes with ",
                                             perm.size(), " positions"));
  }
  std::vector<ir::IterVar> order;
  for (int p : perm) {
    if (p < 0 || static_cast<size_t>(p) >= axes.size()) {
      throw ScheduleError(
          kiln::detail::concat("in stage ", stage.name(), ", reorder position ", p, " is out of range"));
    }
    order.push_back(axes[static_cast<size_t>(p)]);
  }
  stage.reorder(order);
}

void apply_annotate(te::Stage stage, const std::vector<ir::IterVar> &axes, const std::vector<Annotation> &annotations) {
  if (!stage.defined()) throw ScheduleError("apply_annotate on an undefined stage");
  if (annotations.size() != axes.size()) {
    throw ScheduleError(kiln::detail::concat("in stage ", stage.name(), ", ", annotations.size(), " annotations for ",
                                             axes.size(), " axes"));
  }
  for (size_t i = 0; i < axes.size(); ++i) {
    if (annotations[i] == Annotation::Unroll) stage.unroll(axes[i]);
    if (annotations[i] == Annotation::Vectorize) stage.vectorize(axes[i]);
  }
}

}  // namespace kiln::autotune
