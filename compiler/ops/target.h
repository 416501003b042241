#pragma once
// Target: what a template's schedule is made for: the canonical target (contracts/target.h) and
// the facts about it that the CPU templates size their tiles by. The back end that compiles for the
// target knows those facts; driver::resolve_target (compiler/driver/target.h) asks it.
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

}  // namespace kiln::ops
