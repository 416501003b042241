#pragma once
// Target: what a template's schedule is made for: the canonical target (contracts/target.h) and
// the facts about it that the CPU templates size their tiles by. The back end that compiles for the
// target knows those facts; driver::resolve_target (compiler/driver/target.h) asks it.
#include <cstdint>
#include <string>

#include "compiler/ir/type.h"
#include "contracts/target.h"

namespace kiln::ops {

struct Target {
  contracts::Target target;
  // Width of the widest SIMD registers for floating point: 512 with AVX-512, 256 with AVX2, 128
  // otherwise.
  int vector_bits = 128;

  Target(contracts::Target target, int vector_bits);

  const std::string &str() const { return target.str(); }
  // Vector lanes of type t (at least 1).
  int lanes(const ir::DataType &t) const;
  int float_lanes() const { return lanes(ir::Float(32)); }
  // Vector registers of the ISA (32 with AVX-512, 16 otherwise); register tiles are sized by it.
  int vector_registers() const { return vector_bits >= 512 ? 32 : 16; }
};

// Whether a channel block of `b` is whole vectors of `lanes` or a part of one: the blocks the
// blocked templates vectorize (24 channels with 16 lanes run far slower than the NCHW template).
bool vector_block(int64_t b, int64_t lanes);

// The widest block of at most `vectors` vectors of `lanes` that divides `channels` and is a
// vector_block (1 when none is): a blocked convolution's default output block, and the layout
// pass's when the one it would take is not a vector block.
int64_t widest_vector_block(int64_t channels, int64_t lanes, int64_t vectors = 2);

}  // namespace kiln::ops
