#include "deploy/tensor.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <vector>

namespace kiln::deploy {
namespace {

constexpr DType kFloat32{DType::Float, 32};
constexpr DType kInt8{DType::Int, 8};

TEST(DTypeTest, DescribesCppTypes) {
  EXPECT_EQ(DType::of<float>(), kFloat32);
  EXPECT_EQ(DType::of<int8_t>(), kInt8);
  EXPECT_EQ(DType::of<uint16_t>(), (DType{DType::UInt, 16}));
  EXPECT_EQ(DType::of<double>().bytes(), 8u);
  EXPECT_EQ(DType::of<bool>().to_string(), "uint1");
  EXPECT_EQ(DType::of<bool>().bytes(), 1u);
  EXPECT_EQ((DType{DType::Float, 32, 4}).to_string(), "float32x4");
  EXPECT_EQ((DType{DType::Float, 32, 4}).bytes(), 16u);
}

TEST(TensorTest, StorageIs64ByteAligned) {
  for (int64_t n : {1, 3, 17, 1000}) {
    Tensor t = Tensor::empty({n}, kInt8);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % 64, 0u) << "for " << n << " elements";
  }
  Tensor empty = Tensor::empty({0, 4}, kFloat32);
  EXPECT_NE(empty.data(), nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(empty.data()) % kTensorAlignment, 0u);
}

TEST(TensorTest, ShapeAndRowMajorStrides) {
  Tensor t = Tensor::empty({2, 3, 4}, kFloat32);
  EXPECT_EQ(t.shape(), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(t.strides(), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(t.ndim(), 3);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.nbytes(), 96u);
  EXPECT_EQ(t.dtype(), kFloat32);
  EXPECT_TRUE(t.is_contiguous());

  Tensor scalar = Tensor::empty({}, kInt8);
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_TRUE(scalar.strides().empty());
}

TEST(TensorTest, DataAsChecksTheDtype) {
  Tensor t = Tensor::empty({4}, kFloat32);
  EXPECT_NO_THROW(t.data_as<float>());
  EXPECT_THROW(t.data_as<int32_t>(), TensorError);
  EXPECT_THROW(t.data_as<double>(), TensorError);
  const Tensor &ct = t;
  EXPECT_THROW(ct.data_as<uint32_t>(), TensorError);
}

TEST(TensorTest, CopiesAreViewsOfTheSameStorage) {
  Tensor a = Tensor::empty({3}, DType::of<int32_t>());
  std::vector<int32_t> values{7, 8, 9};
  a.copy_from(values.data(), values.size() * sizeof(int32_t));

  Tensor b = a;
  b.data_as<int32_t>()[1] = 42;
  EXPECT_EQ(a.data_as<int32_t>()[1], 42);
  EXPECT_EQ(a.data(), b.data());

  std::vector<int32_t> out(3);
  a.copy_to(out.data(), out.size() * sizeof(int32_t));
  EXPECT_EQ(out, (std::vector<int32_t>{7, 42, 9}));
}

TEST(TensorTest, CopySizesMustMatch) {
  Tensor t = Tensor::empty({2, 2}, kFloat32);
  std::vector<float> small(3);
  EXPECT_THROW(t.copy_from(small.data(), small.size() * sizeof(float)), TensorError);
  EXPECT_THROW(t.copy_to(small.data(), small.size() * sizeof(float)), TensorError);
}

TEST(TensorTest, ViewSharesStorageAtAnOffset) {
  Tensor t = Tensor::empty({2, 3}, DType::of<int32_t>());
  std::vector<int32_t> values(6);
  std::iota(values.begin(), values.end(), 0);
  t.copy_from(values.data(), values.size() * sizeof(int32_t));

  Tensor row = t.view(3, {3});
  EXPECT_EQ(row.shape(), (std::vector<int64_t>{3}));
  EXPECT_EQ(row.data_as<int32_t>()[0], 3);
  row.data_as<int32_t>()[2] = -1;
  EXPECT_EQ(t.data_as<int32_t>()[5], -1);

  Tensor square = t.view(0, {1, 2, 2});
  EXPECT_EQ(square.strides(), (std::vector<int64_t>{4, 2, 1}));

  EXPECT_THROW(t.view(4, {3}), TensorError);
  EXPECT_THROW(t.view(-1, {1}), TensorError);
  EXPECT_THROW(t.view(0, {7}), TensorError);
}

TEST(TensorTest, RejectsBadShapesAndUndefinedUse) {
  EXPECT_THROW(Tensor::empty({2, -1}, kFloat32), TensorError);
  EXPECT_THROW(Tensor::empty({2, -1}, kFloat32), UserError);  // the root every caller can catch
  EXPECT_THROW(Tensor::empty({INT64_MAX, 4}, kFloat32), TensorError);
  EXPECT_THROW(Tensor::empty({2}, (DType{DType::Float, 0})), TensorError);

  Tensor undefined;
  EXPECT_FALSE(undefined.defined());
  EXPECT_THROW(undefined.data(), TensorError);
}

}  // namespace
}  // namespace kiln::deploy
