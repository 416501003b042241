#pragma once
// numpy arrays and deploy::Tensors, both ways; shared by kiln._kiln and kiln._runtime (which links
// kiln_deploy only).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "deploy/tensor.h"

namespace kiln::python {

// The Kiln dtype of an array's elements; TensorError for one Kiln has no dtype for.
inline deploy::DType dtype_of_array(const pybind11::array &a) {
  auto dt = a.dtype();
  char kind = dt.kind();
  auto bits = static_cast<uint8_t>(dt.itemsize() * 8);
  if (kind == 'f') return deploy::DType{deploy::DType::Float, bits, 1};
  if (kind == 'i') return deploy::DType{deploy::DType::Int, bits, 1};
  if (kind == 'u') return deploy::DType{deploy::DType::UInt, bits, 1};
  if (kind == 'b') return deploy::DType{deploy::DType::UInt, 1, 1};
  throw deploy::TensorError("an array of dtype " + std::string(pybind11::str(dt)) +
                            " cannot be passed to a Kiln function");
}

// The numpy dtype of a Kiln dtype.
inline pybind11::dtype numpy_dtype(const deploy::DType &t) {
  if (t.lanes != 1) throw deploy::TensorError("a tensor of vector dtype " + t.to_string() + " has no numpy dtype");
  if (t.code == deploy::DType::UInt && t.bits == 1) return pybind11::dtype("bool");
  const char *kind = t.code == deploy::DType::Float ? "float" : t.code == deploy::DType::Int ? "int" : "uint";
  return pybind11::dtype(kind + std::to_string(t.bits));
}

// A tensor holding a copy of the array's elements.
inline deploy::Tensor tensor_from_array(const pybind11::handle &h) {
  auto a = pybind11::array::ensure(h, pybind11::array::c_style);
  if (!a) throw pybind11::type_error("expected an array, got " + std::string(pybind11::str(h.get_type())));
  std::vector<int64_t> shape(a.shape(), a.shape() + a.ndim());
  deploy::Tensor t = deploy::Tensor::empty(shape, dtype_of_array(a));
  t.copy_from(a.data(), static_cast<size_t>(a.nbytes()));
  return t;
}

// The tensor as a numpy array over the same memory (the array keeps the tensor alive).
inline pybind11::array array_from_tensor(deploy::Tensor t) {
  if (!t.is_contiguous()) throw deploy::TensorError("array_from_tensor: the tensor is not contiguous");
  std::vector<pybind11::ssize_t> shape(t.shape().begin(), t.shape().end());
  auto *owner = new deploy::Tensor(std::move(t));
  pybind11::capsule keep(owner, [](void *p) { delete static_cast<deploy::Tensor *>(p); });
  return pybind11::array(numpy_dtype(owner->dtype()), shape, owner->data(), keep);
}

}  // namespace kiln::python
