#pragma once
// Tensor: an n-dimensional array in host memory, as the deploy runtime hands it to compiled code.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "contracts/error.h"

namespace kiln::deploy {

// A tensor made or used against its own shape, dtype or storage: a bad shape, a typed access of
// another dtype, a copy of the wrong size, a view past the end.
class TensorError : public UserError {
 public:
  using UserError::UserError;
};

// Element type of a tensor: a scalar type, or a short vector of `lanes` scalars.
struct DType {
  enum Code : uint8_t { Int = 0, UInt = 1, Float = 2 };

  Code code = Float;
  uint8_t bits = 32;
  uint16_t lanes = 1;

  // Bytes taken by one element; sub-byte types are padded to whole bytes.
  size_t bytes() const { return (static_cast<size_t>(bits) * lanes + 7) / 8; }

  // "float32", "int8", "uint1", "float32x4".
  std::string to_string() const;

  // The dtype of the C++ scalar type T (bool is uint1).
  template <class T>
  static constexpr DType of();

  bool operator==(const DType &o) const { return code == o.code && bits == o.bits && lanes == o.lanes; }
  bool operator!=(const DType &o) const { return !(*this == o); }
};

template <class T>
constexpr DType DType::of() {
  static_assert(std::is_arithmetic_v<T>, "DType::of<T> needs a C++ arithmetic type");
  if constexpr (std::is_same_v<T, bool>) {
    return DType{UInt, 1, 1};
  } else if constexpr (std::is_floating_point_v<T>) {
    return DType{Float, static_cast<uint8_t>(sizeof(T) * 8), 1};
  } else if constexpr (std::is_signed_v<T>) {
    return DType{Int, static_cast<uint8_t>(sizeof(T) * 8), 1};
  } else {
    return DType{UInt, static_cast<uint8_t>(sizeof(T) * 8), 1};
  }
}

// Every tensor's storage starts at a multiple of this many bytes.
inline constexpr size_t kTensorAlignment = 64;

// A tensor is a view (offset, shape, strides, dtype) of shared storage: copying a Tensor is cheap
// and the copy aliases the same bytes. Storage is freed when the last view goes away.
class Tensor {
 public:
  // An undefined tensor with no storage.
  Tensor() = default;

  // A new row-major tensor with uninitialised contents. Throws TensorError for a
  // negative extent, a zero-sized dtype or a size that overflows.
  static Tensor empty(std::vector<int64_t> shape, DType dtype);

  bool defined() const { return storage_ != nullptr; }
  const std::vector<int64_t> &shape() const { return shape_; }
  // Strides in elements; row-major for tensors made by empty() and view().
  const std::vector<int64_t> &strides() const { return strides_; }
  DType dtype() const { return dtype_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_.bytes(); }
  // Offset of this view's first element from the start of the storage, in elements.
  int64_t offset() const { return offset_; }
  bool is_contiguous() const;

  void *data();
  const void *data() const;

  // Typed access; throws TensorError unless dtype() is DType::of<T>().
  template <class T>
  T *data_as() {
    check_dtype(DType::of<T>());
    return static_cast<T *>(data());
  }
  template <class T>
  const T *data_as() const {
    check_dtype(DType::of<T>());
    return static_cast<const T *>(data());
  }

  // Copy the whole contents in or out; `bytes` must equal nbytes(), else TensorError.
  void copy_from(const void *src, size_t bytes);
  void copy_to(void *dst, size_t bytes) const;

  // A row-major view of `shape` starting `offset` elements into this (contiguous) tensor, sharing
  // its storage. Throws TensorError if it would reach past the end of this tensor.
  Tensor view(int64_t offset, std::vector<int64_t> shape) const;

 private:
  struct Storage;

  void check_dtype(DType requested) const;
  void check_defined(const char *what) const;

  std::shared_ptr<Storage> storage_;
  int64_t offset_ = 0;
  std::vector<int64_t> shape_;
  std::vector<int64_t> strides_;
  DType dtype_;
};

}  // namespace kiln::deploy
