#include "compiler/ops/target.h"

#include <algorithm>
#include <utility>

namespace kiln::ops {

Target::Target(contracts::Target t, int bits) : target(std::move(t)), vector_bits(bits > 0 ? bits : 128) {}

int Target::lanes(const ir::DataType &t) const { return std::max(1, vector_bits / std::max(1, t.bits())); }

}  // namespace kiln::ops
