// The host library's weight arguments on the device: params.npz read once (mapped), each weight rebuilt from its
// stored form when it has one (native/harness/weight_forms.h), allocated in its plan scope (an image for a
// texture scope, half pixels for an fp16 artifact's texture weights) and uploaded once. A damaged or
// inconsistent weight file is a BAD_ARTIFACT error; an allocation or upload TVM refuses is a DEVICE error.
#ifndef ADRENO_RT_DEVICE_WEIGHTS_H_
#define ADRENO_RT_DEVICE_WEIGHTS_H_

#include <tvm/ffi/any.h>

#include <functional>
#include <string>
#include <vector>

#include "../harness/artifact_spec.h"

namespace adreno_rt {

// True when `a` and `b` are one device tensor: the same params.npz member rebuilt and allocated the same way (the
// shape sets of an artifact share a member of the same stored bytes; each set's plan gives its scope and form).
bool SameUpload(const adreno_harness::ParamSpec& a, const adreno_harness::ParamSpec& b);

// The weights in `specs`' order, on OpenCL device `device_id`; rebuilt on up to `threads` threads (0: one per core).
// `verify` sees the file's bytes before any of them is parsed, and throws to refuse them.
std::vector<tvm::ffi::Any> UploadWeights(const std::string& npz_path,
                                         const std::vector<adreno_harness::ParamSpec>& specs, int device_id,
                                         int threads, const std::function<void(const void*, size_t)>& verify);

}  // namespace adreno_rt

#endif  // ADRENO_RT_DEVICE_WEIGHTS_H_
