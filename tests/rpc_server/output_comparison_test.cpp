// The correctness check's comparison (rpc_server/output_comparison.h): for each dtype, outputs just
// inside the tolerance pass and outputs just outside it are mismatches, with the tolerance written
// out here rather than read from the code under test.
#include "rpc_server/output_comparison.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "compiler/ir/float16.h"

namespace kiln::rpc {
namespace {

struct FloatCase {
  const char *name;
  deploy::DType dtype;
  double atol_scale;  // times max(1, max|reference|)
  double rtol;
};

void PrintTo(const FloatCase &c, std::ostream *os) { *os << c.name; }

deploy::Tensor float_tensor(const deploy::DType &dtype, const std::vector<double> &values) {
  deploy::Tensor t = deploy::Tensor::empty({static_cast<int64_t>(values.size())}, dtype);
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype.bits == 16)
      static_cast<uint16_t *>(t.data())[i] = ir::float_to_half(static_cast<float>(values[i]));
    else if (dtype.bits == 32)
      static_cast<float *>(t.data())[i] = static_cast<float>(values[i]);
    else
      static_cast<double *>(t.data())[i] = values[i];
  }
  return t;
}

class FloatTolerance : public ::testing::TestWithParam<FloatCase> {};

// The reference {4, 0, 2, -1}: max|reference| = 4, so atol = 4 * atol_scale; element 2 may be off
// by atol + 2 * rtol, element 1 by atol alone.
TEST_P(FloatTolerance, JustInsidePassesAndJustOutsideIsAMismatch) {
  const FloatCase &c = GetParam();
  const std::vector<double> ref{4.0, 0.0, 2.0, -1.0};
  const deploy::Tensor want = float_tensor(c.dtype, ref);
  EXPECT_EQ(compare_output(float_tensor(c.dtype, ref), want, 0, "out"), "");

  const double atol = 4.0 * c.atol_scale;
  for (const auto &[index, allowed] : {std::pair<size_t, double>{1, atol}, {2, atol + 2.0 * c.rtol}}) {
    for (const double sign : {1.0, -1.0}) {
      std::vector<double> inside = ref, outside = ref;
      inside[index] += sign * 0.9 * allowed;
      outside[index] += sign * 1.1 * allowed;
      EXPECT_EQ(compare_output(float_tensor(c.dtype, inside), want, 0, "out"), "")
          << "element " << index << " off by 0.9 times the tolerance";
      const std::string mismatch = compare_output(float_tensor(c.dtype, outside), want, 3, "out");
      EXPECT_NE(mismatch.find("output 3 (out) differs from the reference at index " + std::to_string(index)),
                std::string::npos)
          << "element " << index << " off by 1.1 times the tolerance: \"" << mismatch << "\"";
    }
  }
}

// A reference below 1 in magnitude still allows atol_scale itself.
TEST_P(FloatTolerance, SmallReferencesKeepTheAbsoluteFloor) {
  const FloatCase &c = GetParam();
  const std::vector<double> ref{0.25, 0.0};
  const deploy::Tensor want = float_tensor(c.dtype, ref);
  EXPECT_EQ(compare_output(float_tensor(c.dtype, {0.25, 0.9 * c.atol_scale}), want, 0, "out"), "");
  EXPECT_NE(compare_output(float_tensor(c.dtype, {0.25, 1.1 * c.atol_scale}), want, 0, "out"), "");
}

TEST_P(FloatTolerance, NanAndInfinityMatchOnlyThemselves) {
  const FloatCase &c = GetParam();
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const deploy::Tensor want = float_tensor(c.dtype, {nan, inf, 1.0});
  EXPECT_EQ(compare_output(float_tensor(c.dtype, {nan, inf, 1.0}), want, 0, "out"), "");
  EXPECT_NE(compare_output(float_tensor(c.dtype, {1.0, inf, 1.0}), want, 0, "out"), "");
  EXPECT_NE(compare_output(float_tensor(c.dtype, {nan, -inf, 1.0}), want, 0, "out"), "");
  EXPECT_NE(compare_output(float_tensor(c.dtype, {nan, inf, nan}), want, 0, "out"), "");
}

TEST_P(FloatTolerance, IsTheDocumentedOne) {
  const FloatCase &c = GetParam();
  const OutputTolerance t = output_tolerance(c.dtype);
  EXPECT_EQ(t.atol_scale, c.atol_scale);
  EXPECT_EQ(t.rtol, c.rtol);
}

INSTANTIATE_TEST_SUITE_P(OutputComparison, FloatTolerance,
                         ::testing::Values(FloatCase{"float16", deploy::DType{deploy::DType::Float, 16, 1}, 1e-2, 1e-2},
                                           FloatCase{"float32", deploy::DType{deploy::DType::Float, 32, 1}, 1e-4, 1e-3},
                                           FloatCase{"float64", deploy::DType{deploy::DType::Float, 64, 1}, 1e-4,
                                                     1e-3}),
                         [](const ::testing::TestParamInfo<FloatCase> &info) { return std::string(info.param.name); });

template <typename T>
deploy::Tensor int_tensor(const std::vector<T> &values) {
  deploy::Tensor t = deploy::Tensor::empty({static_cast<int64_t>(values.size())}, deploy::DType::of<T>());
  for (size_t i = 0; i < values.size(); ++i) t.data_as<T>()[i] = values[i];
  return t;
}

template <typename T>
void expect_exact(T low, T high) {
  const deploy::Tensor want = int_tensor<T>({low, 0, high});
  EXPECT_EQ(compare_output(int_tensor<T>({low, 0, high}), want, 0, "out"), "");
  EXPECT_NE(compare_output(int_tensor<T>({low, 1, high}), want, 0, "out").find("at index 1"), std::string::npos);
  EXPECT_NE(compare_output(int_tensor<T>({low, 0, static_cast<T>(high - 1)}), want, 0, "out").find("at index 2"),
            std::string::npos);
  EXPECT_EQ(output_tolerance(deploy::DType::of<T>()).atol_scale, 0.0);
  EXPECT_EQ(output_tolerance(deploy::DType::of<T>()).rtol, 0.0);
}

TEST(OutputComparison, IntegersMatchExactly) {
  expect_exact<int8_t>(-128, 127);
  expect_exact<uint8_t>(0, 255);
  expect_exact<int16_t>(-32768, 32767);
  expect_exact<int32_t>(std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
  expect_exact<uint32_t>(0, std::numeric_limits<uint32_t>::max());
  expect_exact<int64_t>(-(int64_t{1} << 40), int64_t{1} << 40);
}

TEST(OutputComparison, AnotherDtypeOrSizeIsAMismatch) {
  const deploy::Tensor want = float_tensor(deploy::DType{deploy::DType::Float, 32, 1}, {1.0, 2.0});
  EXPECT_NE(compare_output(float_tensor(deploy::DType{deploy::DType::Float, 64, 1}, {1.0, 2.0}), want, 0, "out")
                .find("another dtype or size"),
            std::string::npos);
  EXPECT_NE(compare_output(float_tensor(deploy::DType{deploy::DType::Float, 32, 1}, {1.0, 2.0, 3.0}), want, 0, "out")
                .find("another dtype or size"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln::rpc
