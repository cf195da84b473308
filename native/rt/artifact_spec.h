// What an artifact directory says about itself, read from manifest.json and plan.json before anything is loaded:
// the model's inputs and outputs (the model's own names, in the host library's argument and result order; the
// index flags of a model with run-time index checks apart) and the weights the host library takes after them (manifest.json host_params order, each with its plan scope and
// the form params.npz stores it in). A file that is missing, not JSON, or disagrees with the other is a
// BAD_ARTIFACT error naming it, and so is a lib.so whose ELF headers reach past its end (elf_file.h: dlopen would map
// it and die of SIGBUS).
#ifndef ADRENO_RT_ARTIFACT_SPEC_H_
#define ADRENO_RT_ARTIFACT_SPEC_H_

#include <dlpack/dlpack.h>
#include <tvm/ffi/extra/json.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../harness/weight_forms.h"
#include "adreno_rt.h"

namespace adreno_rt {

// An element type the library moves: its names in the plan, in TVM and in the C API, and its size.
struct Dtype {
  std::string name;
  DLDataType tvm;
  adreno_rt_dtype api;
  size_t bytes;
};
// Throws RtError(BAD_ARTIFACT) for a dtype the library does not move.
Dtype DtypeNamed(const std::string& name);

// One model input or output.
struct Port {
  std::string name;    // the model's (ONNX) name
  std::string tensor;  // the plan tensor
  Dtype dtype;
  std::vector<int64_t> shape;
  size_t bytes = 0;    // element size x elements
};

// One weight argument of the host library.
struct WeightSpec {
  std::string name, scope, dtype;
  std::vector<int64_t> shape;
  bool stored_otherwise = false;  // params.npz holds another form: rebuilt with `form`
  adreno_harness::StoredForm form;
  bool half_pixels = false;  // a texture weight in a half-float image (an fp16 artifact)
};

struct ArtifactSpec {
  tvm::ffi::json::Object manifest;
  std::vector<Port> inputs, outputs;  // outputs: the model's, without the index flags
  // the host library's last result when the model has run-time index checks (native/harness/index_checks.h)
  std::optional<Port> index_flags;
  std::vector<WeightSpec> weights;
};

ArtifactSpec ReadArtifactSpec(const std::string& dir);

}  // namespace adreno_rt

#endif  // ADRENO_RT_ARTIFACT_SPEC_H_
