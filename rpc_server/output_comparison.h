#pragma once
// The measurement worker's correctness check: a candidate's output against the reference output
// (a plain, unscheduled lowering of the same compute on the same inputs).
//   floats    |got - want| <= atol + rtol * |want|, with atol = atol_scale * max(1, max|reference|)
//             so that sums a schedule reorders still pass; NaN matches NaN, an infinity itself;
//   integers  exactly.
#include <cstddef>
#include <string>

#include "deploy/tensor.h"

namespace kiln::rpc {

struct OutputTolerance {
  double atol_scale = 0;  // times max(1, max|reference|)
  double rtol = 0;        // times |expected|
};

// The tolerance of a dtype: float16 1e-2 and 1e-2; float32 and float64 1e-4 and 1e-3; integers 0.
OutputTolerance output_tolerance(const deploy::DType &dtype);

// "" when `got` matches `want`, otherwise the first mismatch, naming output `index` (`name`), the
// position, both values and the tolerance.
std::string compare_output(const deploy::Tensor &got, const deploy::Tensor &want, size_t index,
                           const std::string &name);

}  // namespace kiln::rpc
