#pragma once
// Target: what code a template's schedule is made for, parsed from a target string such as
// "llvm -mcpu=znver4" or "llvm -mcpu=haswell -mattr=+avx2". The CPU templates take their vector
// width from it: 512 bits for AVX-512 CPUs (16 float lanes), 256 for AVX2 (8), 128 otherwise (4).
#include <string>
#include <vector>

#include "compiler/ir/type.h"

namespace kiln::ops {

struct Target {
  std::string text;                // as given
  std::string kind;                // "llvm", "c", "cuda", ...
  std::string mcpu;                // "" when not given
  std::vector<std::string> mattr;  // "+avx512f", ...
  int vector_bits = 128;

  // Vector lanes of type t (at least 1).
  int lanes(const ir::DataType &t) const;
  int float_lanes() const { return lanes(ir::Float(32)); }
  // Vector registers of the ISA (32 with AVX-512, 16 otherwise); register tiles are sized by it.
  int vector_registers() const { return vector_bits >= 512 ? 32 : 16; }

  // Throws kiln::UserError for an empty string or an option that is not "-name" or "-name=value".
  static Target parse(const std::string &text);
};

}  // namespace kiln::ops
