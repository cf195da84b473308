#include "device_weights.h"

#include <tvm/ffi/function.h>
#include <tvm/runtime/tensor.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "../harness/half.h"
#include "../harness/weights.h"
#include "artifact_files.h"
#include "rt_error.h"

namespace ffi = tvm::ffi;

namespace adreno_rt {

namespace {

// float32 values as the half pixels of an fp16 artifact's image (numpy's rounding, bit for bit)
std::string HalfPixels(const adreno_harness::Floats& values) {
  std::string pixels(values.size() * 2, '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    uint16_t half = adreno_harness::FloatToHalf(values[i]);
    std::memcpy(pixels.data() + 2 * i, &half, 2);
  }
  return pixels;
}

ffi::Any Upload(const adreno_harness::ParamSpec& spec, const adreno_harness::NpyView& stored, int device_id,
                int threads) {
  const bool rebuilt = spec.stored || spec.half_pixels;
  const bool widened = rebuilt && spec.dtype == "int32";  // an integer op's 8-bit weight (ReadParam checked its form)
  adreno_harness::Floats values;
  std::vector<int32_t> integers;
  if (widened) {
    integers = Stage(ADRENO_RT_BAD_ARTIFACT, "",
                     [&] { return adreno_harness::WidenedParamValues(spec.name, stored, spec.form, spec.shape); });
  } else if (rebuilt) {
    values = Stage(ADRENO_RT_BAD_ARTIFACT, "",
                   [&] { return adreno_harness::ParamValues(spec.name, stored, spec.form, spec.shape, threads); });
  } else if (spec.dtype != stored.dtype || spec.shape != stored.shape) {
    throw RtError(ADRENO_RT_BAD_ARTIFACT, spec.name + " in params.npz is " + stored.dtype +
                                              " of another shape than the plan's");
  }
  return Stage(ADRENO_RT_DEVICE, "uploading weight " + spec.name, [&]() -> ffi::Any {
    // a float32 tensor in a half-float image, uploaded as half pixels (adreno/compiler/host_library.py)
    if (spec.half_pixels) {
      static const ffi::Function empty_image = ffi::Function::GetGlobal("adreno.opencl.empty_image").value();
      static const ffi::Function write_pixels = ffi::Function::GetGlobal("adreno.opencl.write_pixels").value();
      ffi::Tensor tensor = empty_image(ffi::Shape(spec.shape), DtypeNamed("float32").tvm, device_id,
                                       ffi::String(spec.scope), 16).cast<ffi::Tensor>();
      write_pixels(tensor, ffi::Bytes(HalfPixels(values)));
      return tensor;
    }
    ffi::Optional<ffi::String> scope = std::nullopt;
    if (spec.scope != "global") scope = ffi::String(spec.scope);
    tvm::runtime::Tensor tensor = tvm::runtime::Tensor::Empty(ffi::Shape(spec.shape), DtypeNamed(spec.dtype).tvm,
                                                              tvm::Device{kDLOpenCL, device_id}, scope);
    if (widened) {
      tensor.CopyFromBytes(integers.data(), integers.size() * sizeof(int32_t));
    } else if (rebuilt) {
      tensor.CopyFromBytes(values.data(), values.size() * sizeof(float));
    } else if (stored.size > 0) {
      tensor.CopyFromBytes(stored.data, stored.size);
    }
    return tensor;
  });
}

}  // namespace

bool SameUpload(const adreno_harness::ParamSpec& a, const adreno_harness::ParamSpec& b) {
  const adreno_harness::StoredForm &x = a.form, &y = b.form;
  return a.name == b.name && a.dtype == b.dtype && a.scope == b.scope && a.shape == b.shape && a.stored == b.stored &&
         a.half_pixels == b.half_pixels && x.transform == y.transform && x.packed == y.packed &&
         x.quantized == y.quantized && x.scale == y.scale && x.zero_point == y.zero_point && x.axis == y.axis;
}

std::vector<ffi::Any> UploadWeights(const std::string& npz_path, const std::vector<adreno_harness::ParamSpec>& specs,
                                    int device_id, int threads,
                                    const std::function<void(const void*, size_t)>& verify) {
  std::optional<adreno_harness::WeightFile> file;
  Stage(ADRENO_RT_BAD_ARTIFACT, "", [&] { file.emplace(npz_path, verify); });
  std::vector<ffi::Any> weights;
  weights.reserve(specs.size());
  for (const adreno_harness::ParamSpec& spec : specs) {
    auto stored = file->arrays().find(spec.name);
    if (stored == file->arrays().end()) throw RtError(ADRENO_RT_BAD_ARTIFACT, npz_path + " has no " + spec.name);
    weights.push_back(Upload(spec, stored->second, device_id, threads));
  }
  return weights;
}

}  // namespace adreno_rt
