#include "deploy/tensor.h"

#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>

namespace kiln::deploy {

namespace {

std::string shape_to_string(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

// Number of elements of `shape`; throws for negative extents or overflow.
int64_t checked_numel(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t extent : shape) {
    if (extent < 0) {
      throw TensorError("tensor shape " + shape_to_string(shape) + " has a negative extent");
    }
    if (__builtin_mul_overflow(n, extent, &n)) {
      throw TensorError("tensor shape " + shape_to_string(shape) + " is too large");
    }
  }
  return n;
}

std::vector<int64_t> row_major_strides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    // Only a tensor with a zero extent can overflow here (checked_numel refuses the rest); its
    // strides are never used to address data, so they saturate.
    if (__builtin_mul_overflow(stride, shape[i], &stride)) stride = std::numeric_limits<int64_t>::max();
  }
  return strides;
}

}  // namespace

std::string DType::to_string() const {
  std::string s;
  switch (code) {
    case Int:
      s = "int";
      break;
    case UInt:
      s = "uint";
      break;
    case Float:
      s = "float";
      break;
    default:
      s = "code" + std::to_string(static_cast<int>(code)) + "_";
      break;
  }
  s += std::to_string(bits);
  if (lanes != 1) s += "x" + std::to_string(lanes);
  return s;
}

// One aligned allocation, shared by every view of it.
struct Tensor::Storage {
  explicit Storage(size_t bytes) : size(bytes) {
    // Never allocate zero bytes, so that data() of an empty tensor is still a valid pointer.
    size_t rounded = (bytes + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment;
    if (rounded == 0) rounded = kTensorAlignment;
    ptr = ::operator new (rounded, std::align_val_t{kTensorAlignment});
  }
  ~Storage() { ::operator delete (ptr, std::align_val_t{kTensorAlignment}); }
  Storage(const Storage &) = delete;
  Storage &operator=(const Storage &) = delete;

  void *ptr = nullptr;
  size_t size = 0;
};

Tensor Tensor::empty(std::vector<int64_t> shape, DType dtype) {
  if (dtype.bits == 0 || dtype.lanes == 0) {
    throw TensorError("tensor dtype " + dtype.to_string() + " has no size");
  }
  int64_t n = checked_numel(shape);
  size_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<size_t>(n), dtype.bytes(), &bytes)) {
    throw TensorError("tensor shape " + shape_to_string(shape) + " is too large");
  }
  Tensor t;
  t.storage_ = std::make_shared<Storage>(bytes);
  t.strides_ = row_major_strides(shape);
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  return t;
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t extent : shape_) n *= extent;
  return n;
}

bool Tensor::is_contiguous() const { return strides_ == row_major_strides(shape_); }

void *Tensor::data() {
  check_defined("data");
  return static_cast<char *>(storage_->ptr) + offset_ * static_cast<int64_t>(dtype_.bytes());
}

const void *Tensor::data() const { return const_cast<Tensor *>(this)->data(); }

void Tensor::copy_from(const void *src, size_t bytes) {
  check_defined("copy_from");
  if (bytes != nbytes()) {
    throw TensorError("copy_from: tensor " + shape_to_string(shape_) + " " + dtype_.to_string() + " holds " +
                      std::to_string(nbytes()) + " bytes, got " + std::to_string(bytes));
  }
  if (bytes) std::memcpy(data(), src, bytes);
}

void Tensor::copy_to(void *dst, size_t bytes) const {
  check_defined("copy_to");
  if (bytes != nbytes()) {
    throw TensorError("copy_to: tensor " + shape_to_string(shape_) + " " + dtype_.to_string() + " holds " +
                      std::to_string(nbytes()) + " bytes, destination has " + std::to_string(bytes));
  }
  if (bytes) std::memcpy(dst, data(), bytes);
}

Tensor Tensor::view(int64_t offset, std::vector<int64_t> shape) const {
  check_defined("view");
  if (!is_contiguous()) {
    throw TensorError("view: tensor " + shape_to_string(shape_) + " is not contiguous");
  }
  int64_t n = checked_numel(shape);
  if (offset < 0 || offset > numel() || n > numel() - offset) {
    throw TensorError("view: " + shape_to_string(shape) + " at offset " + std::to_string(offset) +
                      " does not fit in tensor " + shape_to_string(shape_));
  }
  Tensor t;
  t.storage_ = storage_;
  t.offset_ = offset_ + offset;
  t.strides_ = row_major_strides(shape);
  t.shape_ = std::move(shape);
  t.dtype_ = dtype_;
  return t;
}

void Tensor::check_dtype(DType requested) const {
  check_defined("data_as");
  if (requested != dtype_) {
    throw TensorError("tensor has dtype " + dtype_.to_string() + ", not " + requested.to_string());
  }
}

void Tensor::check_defined(const char *what) const {
  if (!storage_) {
    throw TensorError(std::string(what) + ": tensor is undefined (no storage)");
  }
}

}  // namespace kiln::deploy
