// The runner's random inputs: 8-bit integers over their whole range, so that the correctness check
// sees a kernel that extends them with the wrong sign; floats in [-1, 1]; the same values for the
// same seed.
#include "rpc_server/random_inputs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "deploy/tensor.h"

namespace kiln::rpc {
namespace {

template <typename T>
std::pair<T, T> range_of(const deploy::Tensor &t) {
  const T *p = static_cast<const T *>(t.data());
  auto [lo, hi] = std::minmax_element(p, p + t.numel());
  return {*lo, *hi};
}

TEST(RandomInputsTest, Uint8InputsReachAbove127) {
  deploy::Tensor t = deploy::Tensor::empty({64, 64}, deploy::DType{deploy::DType::UInt, 8, 1});
  fill_random_inputs(t, 42);
  auto [lo, hi] = range_of<uint8_t>(t);
  EXPECT_GT(hi, 127) << "a uint8 kernel that sign-extends would go unnoticed";
  EXPECT_GE(hi, 250);
  EXPECT_LE(lo, 5);
}

TEST(RandomInputsTest, Int8InputsReachBelowMinus64AndAbove63) {
  deploy::Tensor t = deploy::Tensor::empty({64, 64}, deploy::DType{deploy::DType::Int, 8, 1});
  fill_random_inputs(t, 42);
  auto [lo, hi] = range_of<int8_t>(t);
  EXPECT_LT(lo, -64);
  EXPECT_GT(hi, 63);
  EXPECT_LE(lo, -120);
  EXPECT_GE(hi, 120);
}

TEST(RandomInputsTest, FloatsStayInMinusOneToOne) {
  deploy::Tensor t = deploy::Tensor::empty({1000}, deploy::DType{deploy::DType::Float, 32, 1});
  fill_random_inputs(t, 7);
  auto [lo, hi] = range_of<float>(t);
  EXPECT_GE(lo, -1.0f);
  EXPECT_LE(hi, 1.0f);
  EXPECT_LT(lo, -0.9f);
  EXPECT_GT(hi, 0.9f);
}

TEST(RandomInputsTest, TheSameSeedGivesTheSameValues) {
  deploy::Tensor a = deploy::Tensor::empty({256}, deploy::DType{deploy::DType::Int, 8, 1});
  deploy::Tensor b = deploy::Tensor::empty({256}, deploy::DType{deploy::DType::Int, 8, 1});
  fill_random_inputs(a, 3);
  fill_random_inputs(b, 3);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.nbytes()), 0);
}

}  // namespace
}  // namespace kiln::rpc
