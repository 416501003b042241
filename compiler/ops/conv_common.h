#pragma once
// Internal to the operator library: what the convolution templates (conv2d.cpp, conv_fused.cpp)
// share, and the window arguments the pooling template (pool.cpp) reads the same way; defined in
// conv2d.cpp.
#include <cstdint>
#include <string>
#include <vector>

#include "contracts/json.h"

namespace kiln::ops::detail {

// A convolution or pooling window's arguments: "strides" and "dilation" ([H, W], an int for both)
// and "padding" (padding_arg in templates.h).
struct ConvWindow {
  int64_t sh = 1, sw = 1, pt = 0, pl = 0, pb = 0, pr = 0, dh = 1, dw = 1;
};

// Parses them, rejecting strides or dilation below one and negative padding (bad_args). Strides
// not given are `default_strides` ([H, W]: [1, 1] for a convolution, the kernel for pooling);
// dilation not given is [1, 1].
ConvWindow window_arg(const std::string &tmpl, const contracts::Json &args,
                      const std::vector<int64_t> &default_strides = {1, 1});

// The output columns of a register tile of at most `cap` columns over a row of `width`: the
// largest divisor of the width within `cap`, unless it fills less than half of the room (an odd
// width such as 111 = 3 x 37 or a prime one), then the largest power of two within `cap`, with a
// tail tile for the rest of the row.
int64_t tile_columns(int64_t width, int64_t cap);

}  // namespace kiln::ops::detail
