// Out-of-line float16/bfloat16 conversions for callers outside kernels/ (tests, optimizers,
// tools). The reduction loops use the inline forms in half_bits.h directly.
#include "kernels/half_bits.h"
#include "kernels/reducer.h"

namespace zps::kernels {

float halfToFloat(uint16_t h) { return detail::halfBitsToFloat(h); }

uint16_t floatToHalf(float f) { return detail::floatToHalfBits(f); }

float bfloat16ToFloat(uint16_t b) { return detail::bfloat16BitsToFloat(b); }

uint16_t floatToBfloat16(float f) { return detail::floatToBfloat16Bits(f); }

}  // namespace zps::kernels
