// An artifact directory proved whole and described before anything is loaded (native/harness/integrity.h,
// kernel_contract.h, artifact_spec.h: the checks Artifact.load makes in Python): manifest.json's run_sha256, the
// size and SHA-256 of plan.json and lib.so, the plan's steps against their kernels' contracts, then the model's
// inputs and outputs (the model's own names, in the host library's argument and result order; the index flags of
// a model with run-time index checks apart) and the weights it takes after them. An artifact of several shape sets
// is refused (one set per artifact for now). Any failure is a BAD_ARTIFACT error naming the file and the field.
#ifndef ADRENO_RT_ARTIFACT_FILES_H_
#define ADRENO_RT_ARTIFACT_FILES_H_

#include <dlpack/dlpack.h>
#include <tvm/ffi/extra/json.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../harness/artifact_spec.h"
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

struct ArtifactFiles {
  tvm::ffi::json::Object manifest;
  std::vector<Port> inputs, outputs;  // outputs: the model's, without the index flags
  // the host library's last result when the model has run-time index checks (native/harness/index_checks.h)
  std::optional<Port> index_flags;
  std::vector<adreno_harness::ParamSpec> params;  // the weights, in host_params order
};

// Adds the milliseconds spent proving the files whole to *verify_ms.
ArtifactFiles ReadArtifactFiles(const std::string& dir, double* verify_ms);

}  // namespace adreno_rt

#endif  // ADRENO_RT_ARTIFACT_FILES_H_
