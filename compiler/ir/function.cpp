#include "compiler/ir/function.h"

#include <ostream>

#include "compiler/ir/ir_printer.h"
#include "compiler/ir/op.h"

namespace kiln::ir {

Expr Buffer::offset_of(const std::vector<Expr> &indices) const {
  if (indices.size() != shape.size()) {
    throw InternalError(
        detail::concat("buffer ", name, " has ", shape.size(), " dimensions, indexed with ", indices.size()));
  }
  Expr off;
  for (size_t i = 0; i < indices.size(); ++i) {
    Expr term = is_one(strides[i]) ? indices[i] : indices[i] * strides[i];
    off = off.defined() ? off + term : term;
  }
  return off.defined() ? off : make_zero(Int(32));
}

Buffer make_buffer(const std::string &name, DataType dtype, std::vector<Expr> shape, const std::string &scope) {
  Buffer b;
  b.name = name;
  b.data = Var(name, Handle());
  const_cast<VariableNode *>(b.data.get())->pointee = dtype;
  b.dtype = dtype;
  b.shape = std::move(shape);
  b.scope = scope;
  b.strides.resize(b.shape.size());
  Expr stride = make_one(Int(32));
  for (size_t i = b.shape.size(); i-- > 0;) {
    b.strides[i] = stride;
    Expr dim = b.shape[i].type() == Int(32) ? b.shape[i] : cast(Int(32), b.shape[i]);
    if (is_one(stride)) {
      stride = dim;
    } else if (auto a = as_const_int(stride), c = as_const_int(dim); a && c) {
      stride = make_const(Int(32), *a * *c);
    } else {
      stride = stride * dim;
    }
  }
  return b;
}

std::ostream &operator<<(std::ostream &os, const LoweredFunc &f) {
  os << "func " << f.name << "(";
  for (size_t i = 0; i < f.params.size(); ++i) {
    if (i) os << ", ";
    const auto &b = f.params[i];
    os << b.name << ": " << b.dtype.to_string() << "[";
    for (size_t d = 0; d < b.shape.size(); ++d) {
      if (d) os << ", ";
      os << b.shape[d];
    }
    os << "]";
  }
  os << ") {\n" << f.body << "}\n";
  return os;
}

}  // namespace kiln::ir
