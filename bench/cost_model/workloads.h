#pragma once
// The workloads of the cost-model benchmark: three dense_pack shapes (a square one, a small batch
// of a classifier, a transformer's feed-forward layer), three conv2d_nchwc layers of ResNet-style
// networks and two MobileNet-style depthwise layers, all float32 on the host CPU.
#include <cstdint>
#include <string>
#include <vector>

#include "contracts/json.h"

namespace kiln::bench {

struct CostModelWorkload {
  std::string label;          // short name for tables, e.g. "dense_1024"
  std::string template_name;  // e.g. "dense_pack.x86"
  contracts::Json args;
};

inline contracts::Json float_tensor(const std::vector<int64_t> &shape) {
  return contracts::Json::object({{"shape", contracts::Json::array_of(shape)}, {"dtype", "float32"}});
}

inline CostModelWorkload dense_workload(const std::string &label, int64_t m, int64_t n, int64_t k) {
  return {
      label, "dense_pack.x86",
      contracts::Json::object({{"data", float_tensor({m, k})}, {"weight", float_tensor({n, k})}, {"prepacked", true}})};
}

inline CostModelWorkload conv_workload(const std::string &label, int64_t c, int64_t hw, int64_t oc, int64_t k,
                                       int64_t stride, int64_t pad, bool depthwise = false) {
  using contracts::Json;
  const std::vector<int64_t> kernel = depthwise ? std::vector<int64_t>{c, 1, k, k} : std::vector<int64_t>{oc, c, k, k};
  return {label, depthwise ? "depthwise_conv2d_nchwc.x86" : "conv2d_nchwc.x86",
          Json::object({{"data", float_tensor({1, c, hw, hw})},
                        {"kernel", float_tensor(kernel)},
                        {"strides", Json::array_of(std::vector<int64_t>{stride, stride})},
                        {"padding", Json::array_of(std::vector<int64_t>{pad, pad, pad, pad})},
                        {"dilation", Json::array_of(std::vector<int64_t>{1, 1})}})};
}

inline std::vector<CostModelWorkload> cost_model_workloads() {
  return {
      dense_workload("dense_1024", 1024, 1024, 1024),
      dense_workload("dense_16x1000x2048", 16, 1000, 2048),
      dense_workload("dense_128x3072x768", 128, 3072, 768),
      conv_workload("conv_64_56_3x3", 64, 56, 64, 3, 1, 1),
      conv_workload("conv_128_28_3x3_s2", 128, 28, 256, 3, 2, 1),
      conv_workload("conv_256_14_1x1_s2", 256, 14, 512, 1, 2, 0),
      conv_workload("dwconv_32_112", 32, 112, 32, 3, 1, 1, /*depthwise=*/true),
      conv_workload("dwconv_128_56_s2", 128, 56, 128, 3, 2, 1, /*depthwise=*/true),
  };
}

}  // namespace kiln::bench
