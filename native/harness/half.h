// float -> IEEE half, rounding to nearest even as numpy's astype(float16) does: an fp16 artifact's texture weights
// are uploaded as half pixels, bit for bit what the launch-plan executor uploads.
#ifndef ADRENO_HARNESS_HALF_H_
#define ADRENO_HARNESS_HALF_H_

#include <cstdint>
#include <cstring>

namespace adreno_harness {

inline uint16_t FloatToHalf(float value) {
  uint32_t x;
  std::memcpy(&x, &value, sizeof(x));
  const uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mantissa = x & 0x7fffffu;
  const int32_t exponent = static_cast<int32_t>((x >> 23) & 0xffu);
  if (exponent == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mantissa ? 0x200u : 0u));  // inf, nan
  const int32_t biased = exponent - 127 + 15;
  if (biased >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00u);  // beyond half's range: infinity
  if (biased <= 0) {  // a half subnormal, or zero
    if (biased < -10) return static_cast<uint16_t>(sign);
    mantissa |= 0x800000u;
    const uint32_t shift = static_cast<uint32_t>(14 - biased);
    uint32_t half = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(biased) << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // a carry into the exponent is right
  return static_cast<uint16_t>(half);
}

// IEEE half -> float (exact): a float16 weight of params.npz widened for a transform.
inline float HalfToFloat(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  uint32_t exponent = (half >> 10) & 0x1fu, mantissa = half & 0x3ffu, bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);  // inf, nan
  } else if (exponent != 0) {
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {  // a subnormal half is a normal float
    exponent = 127 - 15 + 1;
    while (!(mantissa & 0x400u)) {
      mantissa <<= 1;
      --exponent;
    }
    bits = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
  }
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

}  // namespace adreno_harness

#endif  // ADRENO_HARNESS_HALF_H_
