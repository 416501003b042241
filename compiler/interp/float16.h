#pragma once
// IEEE half precision conversions used by the interpreter. The C back end emits the same
// algorithms, so that both round identically.
#include <cstdint>

namespace kiln::interp {

// Rounds to the nearest half, ties to even; overflow gives infinity, NaN stays NaN.
uint16_t float_to_half(float f);
float half_to_float(uint16_t h);

// A float rounded to the nearest value a half can hold.
inline float round_to_half(float f) { return half_to_float(float_to_half(f)); }

}  // namespace kiln::interp
