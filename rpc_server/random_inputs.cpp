#include "rpc_server/random_inputs.h"

#include <random>
#include <type_traits>

#include "compiler/ir/float16.h"
#include "contracts/error.h"

namespace kiln::rpc {

void fill_random_inputs(deploy::Tensor &t, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const deploy::DType dt = t.dtype();
  const int64_t n = t.numel() * dt.lanes;
  void *p = t.data();
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  auto ints = [&](auto *out, int64_t lo, int64_t hi) {
    std::uniform_int_distribution<int64_t> d(lo, hi);
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<std::remove_pointer_t<decltype(out)>>(d(rng));
  };
  if (dt.code == deploy::DType::Float && dt.bits == 32) {
    float *f = static_cast<float *>(p);
    for (int64_t i = 0; i < n; ++i) f[i] = static_cast<float>(real(rng));
  } else if (dt.code == deploy::DType::Float && dt.bits == 64) {
    double *f = static_cast<double *>(p);
    for (int64_t i = 0; i < n; ++i) f[i] = real(rng);
  } else if (dt.code == deploy::DType::Float && dt.bits == 16) {
    uint16_t *h = static_cast<uint16_t *>(p);
    for (int64_t i = 0; i < n; ++i) h[i] = ir::float_to_half(static_cast<float>(real(rng)));
  } else if (dt.code == deploy::DType::Int && dt.bits == 8) {
    ints(static_cast<int8_t *>(p), -128, 127);
  } else if (dt.code == deploy::DType::Int && dt.bits == 16) {
    ints(static_cast<int16_t *>(p), -64, 64);
  } else if (dt.code == deploy::DType::Int && dt.bits == 32) {
    ints(static_cast<int32_t *>(p), -64, 64);
  } else if (dt.code == deploy::DType::Int && dt.bits == 64) {
    ints(static_cast<int64_t *>(p), -64, 64);
  } else if (dt.code == deploy::DType::UInt && dt.bits == 1) {
    ints(static_cast<uint8_t *>(p), 0, 1);
  } else if (dt.code == deploy::DType::UInt && dt.bits == 8) {
    ints(static_cast<uint8_t *>(p), 0, 255);
  } else if (dt.code == deploy::DType::UInt && dt.bits == 16) {
    ints(static_cast<uint16_t *>(p), 0, 64);
  } else if (dt.code == deploy::DType::UInt && dt.bits == 32) {
    ints(static_cast<uint32_t *>(p), 0, 64);
  } else if (dt.code == deploy::DType::UInt && dt.bits == 64) {
    ints(static_cast<uint64_t *>(p), 0, 64);
  } else {
    throw UserError("cannot make random inputs of dtype " + dt.to_string());
  }
}

}  // namespace kiln::rpc
