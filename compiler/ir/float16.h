#pragma once
// IEEE half precision conversions: the interpreter computes with them, the back ends fold float16
// constants with them and emit the same algorithms, so that all of them round identically.
#include <cstdint>

namespace kiln::ir {

// Rounds to the nearest half, ties to even; overflow gives infinity, NaN stays NaN.
uint16_t float_to_half(float f);
float half_to_float(uint16_t h);

// A float rounded to the nearest value a half can hold.
inline float round_to_half(float f) { return half_to_float(float_to_half(f)); }

}  // namespace kiln::ir
