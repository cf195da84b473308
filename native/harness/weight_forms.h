// A param of the launch plan from what params.npz stores for it: the C++ half of adreno/artifact/weights.py's contract.
// plan.json's tensor entry says the stored form ("stored": absent for a param stored as it is; else its shape,
// dtype and transform): a float16 member is widened; a Winograd member is the model's 3x3 weight g (O, C, 3, 3),
// transformed here to U = G g G^T (alpha, alpha, O, C), and laid out for packed stages when "packed" is set
// (alpha, alpha, ceil(O/4), 4 ceil(C/4), 4); a "none" member with "packed" set is an (O, I, KH, KW) weight packed
// here to the plan's OIHW4o shape (ceil(O/4), I', KH, KW, 4), as the texture planner packed it
// (adreno/targets/layout.py). A "transpose" member is a 2-D (K, N) weight transposed to (N, K), the constant Relax
// folds a Dense weight into. An int32 param (an integer op's weight) from an int8 / uint8 member of scale 1 is that
// member widened, int32(q) - zero_point (WidenedParamValues). The float64 operations run in adreno.artifact.winograd_weights.transform_weight's order
// and this file is compiled with -ffp-contract=off, so U is the launch-plan executor's bit for bit.
#ifndef ADRENO_HARNESS_WEIGHT_FORMS_H_
#define ADRENO_HARNESS_WEIGHT_FORMS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "npy.h"

namespace adreno_harness {

// An allocator that leaves a vector's elements uninitialised when no value is given (`Floats(n)`; `Floats(n, 0.0f)`
// still fills): a rebuilt weight is written whole by its transform, and a vector's own zero fill of ResNet-18's
// largest Winograd weight (37.7 MB) was 20 ms of page faults on one thread, half of its transform, before the
// transform's threads could touch their own pages.
template <typename T>
struct UninitializedAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() = default;
  template <typename U>
  UninitializedAllocator(const UninitializedAllocator<U>&) noexcept {}
  template <typename U>
  void construct(U* at) noexcept {
    ::new (static_cast<void*>(at)) U;
  }
  template <typename U, typename... Args>
  void construct(U* at, Args&&... args) {
    ::new (static_cast<void*>(at)) U(std::forward<Args>(args)...);
  }
};
using Floats = std::vector<float, UninitializedAllocator<float>>;

struct StoredForm {
  std::string transform = "none";  // "none", "winograd2", "winograd4", "transpose" (a 2-D member, transposed)
  bool packed = false;  // laid out for packed (NCHW4c) stages: Winograd's U, or a "none" weight in OIHW4o
  // an int8 / uint8 member (adreno/artifact/weights.py Quantization): float(int32(q) - zero_point) * scale, in float32,
  // per tensor (axis -1, one of each) or per index of `axis`; done before the transform
  bool quantized = false;
  std::vector<float> scale;
  std::vector<int32_t> zero_point;
  int64_t axis = -1;
};

// The param's float32 values, C order, `shape` being the plan's, transformed on up to `threads` threads (0: one per
// core). Throws std::runtime_error naming the param when the stored member does not give that shape.
Floats ParamValues(const std::string& name, const NpyView& stored, const StoredForm& form,
                   const std::vector<int64_t>& shape, int threads = 0);

// Whether `form` gives an int32 param (adreno.artifact.weights.StoredWeight.gives): an integer op's weight
// (MatMulInteger's B), stored as its int8 / uint8 member with a scale of 1, as it is or transposed.
bool WidensToInt32(const StoredForm& form);

// That int32 param, int32(q) - zero_point (adreno.artifact.weights.Quantization.widen), C order in the plan's `shape`.
// Rebuilt through ParamValues, with its checks: exact, as |q - zero_point| <= 510 is far below float32's 2^24 and the
// multiply by a scale of 1 changes nothing. Throws naming the param when `form` is no such widening.
std::vector<int32_t> WidenedParamValues(const std::string& name, const NpyView& stored, const StoredForm& form,
                                        const std::vector<int64_t>& shape);

}  // namespace adreno_harness

#endif  // ADRENO_HARNESS_WEIGHT_FORMS_H_
