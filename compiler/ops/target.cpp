#include "compiler/ops/target.h"

#include <algorithm>
#include <utility>

namespace kiln::ops {

Target::Target(contracts::Target t, int bits) : target(std::move(t)), vector_bits(bits > 0 ? bits : 128) {}

int Target::lanes(const ir::DataType &t) const { return std::max(1, vector_bits / std::max(1, t.bits())); }

bool vector_block(int64_t b, int64_t lanes) { return b > 0 && lanes > 0 && (b % lanes == 0 || lanes % b == 0); }

int64_t widest_vector_block(int64_t channels, int64_t lanes, int64_t vectors) {
  for (int64_t b = std::min(channels, vectors * lanes); b > 1; --b) {
    if (channels % b == 0 && vector_block(b, lanes)) return b;
  }
  return 1;
}

}  // namespace kiln::ops
