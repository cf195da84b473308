// Sizes read from files, combined in checked 64-bit arithmetic: every offset, extent and byte count that a file
// declares passes through these before it indexes memory, so a field near 2^32 or 2^63 is a refusal naming the file
// and the field, never a wrapped bound that passes (the zip offset of issue 46 wrapped `local + 30` in 32 bits).
#ifndef ADRENO_HARNESS_CHECKED_H_
#define ADRENO_HARNESS_CHECKED_H_

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace adreno_harness {

// The largest tensor a file may declare: 2^40 elements (adreno.artifact.check.MAX_ELEMENTS), far beyond any model's
// and far below where an element count times an element size could wrap in 64 bits.
constexpr uint64_t kMaxElements = uint64_t{1} << 40;

// a + b, or a std::runtime_error "<where>: <field> ..." when the sum exceeds `limit` (or wraps).
inline uint64_t CheckedAdd(uint64_t a, uint64_t b, uint64_t limit, const std::string& where, const char* field) {
  uint64_t sum;
  if (__builtin_add_overflow(a, b, &sum) || sum > limit) {
    throw std::runtime_error(where + ": " + field + " reaches byte " + std::to_string(a) + " + " + std::to_string(b) +
                             ", past the end (" + std::to_string(limit) + ")");
  }
  return sum;
}

// The element count of `shape`, or a std::runtime_error naming `where` when an extent is negative or the count
// exceeds kMaxElements.
inline uint64_t CheckedElements(const std::vector<int64_t>& shape, const std::string& where) {
  uint64_t count = 1;
  for (int64_t d : shape) {
    if (d < 0) throw std::runtime_error(where + ": shape has the negative extent " + std::to_string(d));
    if (__builtin_mul_overflow(count, static_cast<uint64_t>(d), &count) || count > kMaxElements) {
      throw std::runtime_error(where + ": shape has more than 2^40 elements");
    }
  }
  return count;
}

}  // namespace adreno_harness

#endif  // ADRENO_HARNESS_CHECKED_H_
