#pragma once
// A lowered function: what lower() returns and every code generator and the interpreter consume.
#include <string>
#include <vector>

#include "compiler/ir/ir.h"

namespace kiln::ir {

// A flat region of memory seen as a tensor: its data pointer variable (a handle whose pointee is
// the element type), element type, shape and strides (in elements). Shapes and strides may be
// symbolic (variables listed in LoweredFunc::size_vars).
struct Buffer {
  std::string name;
  Var data;  // handle
  DataType dtype;
  std::vector<Expr> shape;
  std::vector<Expr> strides;  // row-major compact unless set otherwise
  std::string scope = "global";

  // Flat element offset of a multi-dimensional index.
  Expr offset_of(const std::vector<Expr> &indices) const;
};

Buffer make_buffer(const std::string &name, DataType dtype, std::vector<Expr> shape,
                   const std::string &scope = "global");

struct LoweredFunc {
  std::string name;
  // Tensor arguments, in the order the caller passes them.
  std::vector<Buffer> params;
  // Symbolic sizes, in order of first appearance in params' shapes. A caller (interpreter,
  // generated entry point) derives each from the shape of the first param that mentions it as a
  // whole dimension, and checks all other uses for consistency.
  std::vector<Var> size_vars;
  Stmt body;
};

std::ostream &operator<<(std::ostream &os, const LoweredFunc &f);

}  // namespace kiln::ir
