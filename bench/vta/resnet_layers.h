#pragma once
// ResNet-18's convolutions after the first (C2-C11), as the VTA reference benchmark lists them,
// and the arguments of `conv2d_nchw_int8.vta` for one of them: shared by vta_resnet_bench and the
// VTA conv2d tests.
#include <cstdint>
#include <vector>

#include "contracts/json.h"

namespace kiln::bench {

struct VtaConvLayer {
  const char *name;
  int64_t h, ic, oc, k, stride, pad;  // square input of h x h, ic -> oc channels, k x k kernel
};

inline const VtaConvLayer kResnet18Layers[] = {
    {"C2", 56, 64, 64, 3, 1, 1},    {"C3", 56, 64, 64, 1, 1, 0},   {"C4", 56, 64, 128, 3, 2, 1},
    {"C5", 56, 64, 128, 1, 2, 0},   {"C6", 28, 128, 128, 3, 1, 1}, {"C7", 28, 128, 256, 3, 2, 1},
    {"C8", 28, 128, 256, 1, 2, 0},  {"C9", 14, 256, 256, 3, 1, 1}, {"C10", 14, 256, 512, 3, 2, 1},
    {"C11", 14, 256, 512, 1, 2, 0},
};

// The workload of `conv2d_nchw_int8.vta` for the layer at an input of h x h (the layer's own h or
// a smaller one), with a bias: data NCHW1n16c, kernel OIHW16o16i, int8.
inline contracts::Json vta_conv_args(const VtaConvLayer &l, int64_t h) {
  auto tensor = [](std::vector<int64_t> shape) {
    return contracts::Json::object({{"shape", contracts::Json::array_of(shape)}, {"dtype", contracts::Json("int8")}});
  };
  return contracts::Json::object({{"data", tensor({1, l.ic / 16, h, h, 1, 16})},
                                  {"kernel", tensor({l.oc / 16, l.ic / 16, l.k, l.k, 16, 16})},
                                  {"bias", contracts::Json(true)},
                                  {"strides", contracts::Json(l.stride)},
                                  {"padding", contracts::Json(l.pad)}});
}

}  // namespace kiln::bench
