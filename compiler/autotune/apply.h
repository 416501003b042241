#pragma once
// Applying knob values to a schedule: the split, reorder and annotate values of a config turned
// into schedule primitives. Illegal requests raise ScheduleError, as the primitives do.
#include <cstdint>
#include <vector>

#include "compiler/autotune/config_space.h"
#include "compiler/te/schedule.h"

namespace kiln::autotune {

// Splits `axis` of `stage` into sizes.size() loops of the given sizes (outermost first; the
// outermost size is implied by the others, so a tail is handled by the split's predicate).
// Returns the loops, outermost first.
std::vector<ir::IterVar> apply_split(te::Stage stage, const ir::IterVar &axis, const std::vector<int64_t> &sizes);

// Reorders `axes` (leaf loops of `stage`) so that position i runs axes[perm[i]]; the positions the
// axes occupy among the stage's loops stay the same.
void apply_reorder(te::Stage stage, const std::vector<ir::IterVar> &axes, const std::vector<int> &perm);

// Unrolls or vectorizes each of `axes` as `annotations` say ("none" leaves a loop alone).
void apply_annotate(te::Stage stage, const std::vector<ir::IterVar> &axes, const std::vector<Annotation> &annotations);

}  // namespace kiln::autotune
