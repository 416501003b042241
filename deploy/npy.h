#pragma once
// NumPy's .npy format (versions 1, 2 and 3; little-endian, C order), the way tensors go in and out
// of `kiln run` and the Python package.
#include <string>
#include <string_view>

#include "deploy/tensor.h"

namespace kiln::deploy {

// A file that is not a .npy Kiln can read: a bad magic or header, Fortran order, a big-endian or
// unsupported dtype, or data shorter than the header says. The message names the file.
class NpyError : public TensorError {
 public:
  using TensorError::TensorError;
};

// The tensor in `bytes` (the whole file); `name` is used in messages.
Tensor parse_npy(std::string_view bytes, const std::string &name);
Tensor read_npy(const std::string &path);
// The .npy bytes of a tensor (format version 1.0, or 2.0 when the header needs it).
std::string to_npy(const Tensor &t);
// Writes atomically (a temporary file renamed over `path`).
void write_npy(const std::string &path, const Tensor &t);

}  // namespace kiln::deploy
