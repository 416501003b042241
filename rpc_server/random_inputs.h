#pragma once
// The random inputs a runner measures candidates on, and computes their reference output from.
#include <cstdint>

#include "deploy/tensor.h"

namespace kiln::rpc {

// Fills `t` with random values, the same for the same seed. Floats are in [-1, 1]. 8-bit integers
// cover their whole range (int8 [-128, 127], uint8 [0, 255]), so that the correctness check sees a
// kernel that extends them with the wrong sign; their products accumulate exactly in int32 for any
// realistic reduction (2^31 / 128^2 = 131072 terms). Wider integers stay small ([-64, 64] signed,
// [0, 64] unsigned) so that their products and sums do not overflow; booleans are 0 or 1. Throws
// UserError for a dtype it cannot fill.
void fill_random_inputs(deploy::Tensor &t, uint64_t seed);

}  // namespace kiln::rpc
