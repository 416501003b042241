#include "rpc_server/output_comparison.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "compiler/ir/float16.h"

namespace kiln::rpc {

namespace {

int64_t scalar_count(const deploy::Tensor &t) { return t.numel() * t.dtype().lanes; }

double scalar_at(const deploy::Tensor &t, int64_t i) {
  const deploy::DType dt = t.dtype();
  const void *p = t.data();
  switch (dt.code) {
    case deploy::DType::Float:
      if (dt.bits == 16) return ir::half_to_float(static_cast<const uint16_t *>(p)[i]);
      if (dt.bits == 32) return static_cast<const float *>(p)[i];
      return static_cast<const double *>(p)[i];
    case deploy::DType::Int:
      if (dt.bits == 8) return static_cast<const int8_t *>(p)[i];
      if (dt.bits == 16) return static_cast<const int16_t *>(p)[i];
      if (dt.bits == 32) return static_cast<const int32_t *>(p)[i];
      return static_cast<double>(static_cast<const int64_t *>(p)[i]);
    case deploy::DType::UInt:
      if (dt.bits <= 8) return static_cast<const uint8_t *>(p)[i];
      if (dt.bits == 16) return static_cast<const uint16_t *>(p)[i];
      if (dt.bits == 32) return static_cast<const uint32_t *>(p)[i];
      return static_cast<double>(static_cast<const uint64_t *>(p)[i]);
  }
  return 0;
}

}  // namespace

OutputTolerance output_tolerance(const deploy::DType &dtype) {
  if (dtype.code != deploy::DType::Float) return {0.0, 0.0};
  if (dtype.bits == 16) return {1e-2, 1e-2};
  return {1e-4, 1e-3};
}

std::string compare_output(const deploy::Tensor &got, const deploy::Tensor &want, size_t index,
                           const std::string &name) {
  const int64_t n = scalar_count(want);
  if (got.dtype() != want.dtype() || scalar_count(got) != n) {
    return "output " + std::to_string(index) + " (" + name + ") has another dtype or size than the reference";
  }
  if (want.dtype().code != deploy::DType::Float) {
    if (std::memcmp(got.data(), want.data(), want.nbytes()) == 0) return "";
    for (int64_t i = 0; i < n; ++i) {
      if (scalar_at(got, i) != scalar_at(want, i)) {
        std::ostringstream os;
        os << "output " << index << " (" << name << ") differs from the reference at index " << i << ": got "
           << scalar_at(got, i) << ", expected " << scalar_at(want, i);
        return os.str();
      }
    }
    return "";
  }
  const OutputTolerance tol = output_tolerance(want.dtype());
  double max_ref = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double w = std::fabs(scalar_at(want, i));
    if (std::isfinite(w)) max_ref = std::max(max_ref, w);
  }
  const double atol = tol.atol_scale * std::max(1.0, max_ref);
  for (int64_t i = 0; i < n; ++i) {
    const double g = scalar_at(got, i), w = scalar_at(want, i);
    bool ok;
    if (std::isnan(w))
      ok = std::isnan(g);
    else if (std::isinf(w))
      ok = g == w;
    else
      ok = std::fabs(g - w) <= atol + tol.rtol * std::fabs(w);
    if (!ok) {
      std::ostringstream os;
      os.precision(9);
      os << "output " << index << " (" << name << ") differs from the reference at index " << i << ": got " << g
         << ", expected " << w << " (tolerance " << atol << " + " << tol.rtol << " * |expected|)";
      return os.str();
    }
  }
  return "";
}

}  // namespace kiln::rpc
