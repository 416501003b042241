#pragma once
// One small workload of every template of the builtin operator library (with epilogues where the
// template takes them), for tests that must cover every template: lowering sweeps, features.
#include <cstdint>
#include <string>
#include <vector>

#include "compiler/ops/epilogue.h"
#include "contracts/json.h"

namespace kiln::testing {

struct ExampleWorkload {
  std::string template_name;
  contracts::Json args;
};

inline std::vector<ExampleWorkload> example_workloads() {
  using contracts::Json;
  auto t = [](std::vector<int64_t> shape) {
    return Json::object({{"shape", Json::array_of(shape)}, {"dtype", "float32"}});
  };
  const Json relu = Json::array({ops::epilogue::bias_add(), ops::epilogue::relu()});
  return {
      {"dense_pack.x86", Json::object({{"data", t({6, 20})}, {"weight", t({12, 20})}, {"epilogue", relu}})},
      {"dense_nopack.x86", Json::object({{"data", t({6, 20})}, {"weight", t({12, 20})}, {"epilogue", relu}})},
      {"matmul.x86", Json::object({{"a", t({6, 20})}, {"b", t({20, 12})}})},
      {"batch_matmul.x86", Json::object({{"a", t({2, 6, 8})}, {"b", t({2, 12, 8})}})},
      {"conv2d_nchw.x86",
       Json::object({{"data", t({1, 4, 7, 9})}, {"kernel", t({8, 4, 3, 3})}, {"padding", 1}, {"epilogue", relu}})},
      {"conv2d_nchwc.x86",
       Json::object({{"data", t({1, 8, 7, 9})}, {"kernel", t({8, 8, 3, 3})}, {"padding", 1}, {"epilogue", relu}})},
      {"conv2d_nchwc.x86", Json::object({{"data", t({1, 8, 5, 5})}, {"kernel", t({16, 8, 1, 1})}})},
      {"depthwise_conv2d_nchw.x86",
       Json::object({{"data", t({1, 4, 9, 9})}, {"kernel", t({4, 1, 3, 3})}, {"strides", 2}, {"padding", 1}})},
      {"depthwise_conv2d_nchwc.x86",
       Json::object({{"data", t({1, 8, 9, 7})}, {"kernel", t({8, 1, 3, 3})}, {"padding", 1}, {"epilogue", relu}})},
      {"conv1x1_depthwise_nchwc.x86", Json::object({{"data", t({1, 8, 9, 7})},
                                                    {"expand_kernel", t({16, 8, 1, 1})},
                                                    {"depthwise_kernel", t({16, 1, 3, 3})},
                                                    {"strides", 2},
                                                    {"padding", 1},
                                                    {"expand_epilogue", relu},
                                                    {"epilogue", relu}})},
      {"conv2d_transpose_nchw.x86",
       Json::object({{"data", t({1, 4, 4, 4})}, {"kernel", t({4, 4, 3, 3})}, {"strides", 2}, {"padding", 1}})},
      {"pool2d.x86", Json::object({{"data", t({1, 4, 9, 9})},
                                   {"kernel", Json::array_of(std::vector<int64_t>{3, 3})},
                                   {"padding", 1},
                                   {"pool_type", "avg"}})},
      {"global_pool2d.x86", Json::object({{"data", t({1, 8, 5, 5})}, {"pool_type", "max"}})},
      {"softmax.x86", Json::object({{"data", t({4, 37})}})},
      {"layer_norm.x86", Json::object({{"data", t({4, 40})}})},
      {"elemwise.x86", Json::object({{"data", t({3, 50})}, {"epilogue", relu}})},
      {"broadcast.x86", Json::object({{"lhs", t({3, 50})}, {"rhs", t({50})}})},
      {"reduce.x86", Json::object({{"data", t({3, 50})}, {"axes", 1}})},
      {"layout_transform.x86", Json::object({{"data", t({1, 16, 5, 7})}, {"dst_block", 8}})},
      {"layout_transform.x86", Json::object({{"data", t({1, 2, 5, 7, 8})}, {"src_block", 8}, {"dst_block", 16}})},
      {"elemwise.cuda", Json::object({{"data", t({3, 50})}, {"epilogue", relu}})},
      {"broadcast.cuda", Json::object({{"lhs", t({3, 50})}, {"rhs", t({50})}})},
      {"reduce.cuda", Json::object({{"data", t({3, 50})}, {"axes", 1}})},
      {"pool2d.cuda", Json::object({{"data", t({1, 4, 9, 9})},
                                    {"kernel", Json::array_of(std::vector<int64_t>{3, 3})},
                                    {"padding", 1},
                                    {"pool_type", "avg"}})},
      {"softmax.cuda", Json::object({{"data", t({4, 37})}})},
      {"layer_norm.cuda", Json::object({{"data", t({4, 40})}})},
      {"conv2d_nchw.cuda",
       Json::object({{"data", t({1, 4, 7, 9})}, {"kernel", t({8, 4, 3, 3})}, {"padding", 1}, {"epilogue", relu}})},
      {"depthwise_conv2d_nchw.cuda",
       Json::object({{"data", t({1, 4, 9, 9})}, {"kernel", t({4, 1, 3, 3})}, {"strides", 2}, {"padding", 1}})},
      {"matmul.cuda", Json::object({{"a", t({6, 20})}, {"b", t({20, 12})}})},
      {"dense_int8.vta",
       Json::object(
           {{"data", Json::object({{"shape", Json::array_of(std::vector<int64_t>{4, 2, 1, 16})}, {"dtype", "int8"}})},
            {"weight",
             Json::object({{"shape", Json::array_of(std::vector<int64_t>{4, 2, 16, 16})}, {"dtype", "int8"}})}})},
      {"conv2d_nchw_int8.vta",
       Json::object({{"data", Json::object({{"shape", Json::array_of(std::vector<int64_t>{1, 2, 6, 6, 1, 16})},
                                            {"dtype", "int8"}})},
                     {"kernel", Json::object({{"shape", Json::array_of(std::vector<int64_t>{2, 2, 3, 3, 16, 16})},
                                              {"dtype", "int8"}})},
                     {"padding", 1},
                     {"bias", true}})},
      {"dense.cuda", Json::object({{"data", t({6, 20})}, {"weight", t({12, 20})}, {"epilogue", relu}})},
      {"batch_matmul.cuda", Json::object({{"a", t({2, 6, 8})}, {"b", t({2, 12, 8})}})},
      {"conv2d_nchw_implicit_gemm.cuda",
       Json::object({{"data", t({1, 3, 9, 9})}, {"kernel", t({8, 3, 3, 3})}, {"strides", 2}, {"padding", 1}})},
  };
}

}  // namespace kiln::testing
