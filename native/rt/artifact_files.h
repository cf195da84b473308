// An artifact directory proved whole and described before anything is loaded (native/harness/integrity.h,
// kernel_contract.h, artifact_spec.h: the checks Artifact.load makes in Python): manifest.json's run_sha256, then for
// each shape set (adreno/artifact/shape_sets.py; an artifact of one set is one set whose files are at the top) the
// size and SHA-256 of its plan.json and its model's inputs and outputs (the model's own names, in the host library's
// argument and result order; the index flags of a model with run-time index checks apart) and the weights it takes
// after them. A set's code (its plan's steps against their kernels' contracts, the size, SHA-256 and ELF of its
// lib.so) is proved by VerifySetCode, before that set's library is loaded. Any failure is a BAD_ARTIFACT error
// naming the file and the field.
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
namespace json = tvm::ffi::json;

struct Port {
  std::string name;    // the model's (ONNX) name
  std::string tensor;  // the plan tensor
  Dtype dtype;
  std::vector<int64_t> shape;
  size_t bytes = 0;    // element size x elements
};

// One shape set: what its plan and its manifest fields (the shared ones overlaid with the set's, as
// adreno.artifact.shape_sets.set_manifest reads them) say it runs.
struct ShapeSetFiles {
  json::Object manifest;  // the overlay
  json::Object plan;
  std::string library;  // its host library, relative to the artifact ("lib.so", "shapes/<i>/lib.so")
  std::vector<Port> inputs, outputs;  // outputs: the model's, without the index flags
  // the host library's last result when the model has run-time index checks (native/harness/index_checks.h)
  std::optional<Port> index_flags;
  std::vector<adreno_harness::ParamSpec> params;  // the weights, in host_params order (params.npz member names)
};

struct ArtifactFiles {
  json::Object manifest;  // as written
  std::vector<ShapeSetFiles> sets;  // one for an artifact of one set; every set takes the same inputs, in order
};

// Adds the milliseconds spent proving the files whole to *verify_ms.
ArtifactFiles ReadArtifactFiles(const std::string& dir, double* verify_ms);

// Proves set `set`'s code before its library is loaded: its plan's steps against their kernels' contracts, its
// lib.so's size and SHA-256, then its ELF headers. Adds the milliseconds to *verify_ms.
void VerifySetCode(const std::string& dir, const ArtifactFiles& files, size_t set, double* verify_ms);

// The artifact's kernels as the blob's key names them: the SHA-256 hex of every set's host library SHA-256 (as the
// manifest lists them, run_sha256 proves them and VerifySetCode proves each library against them), in set order.
std::string KernelsKey(const ArtifactFiles& files);

// "x 1x3x48x160, mask 1x160": a set's input shapes as adreno.artifact.shape_sets.label writes them.
std::string ShapesLabel(const std::vector<Port>& inputs);

}  // namespace adreno_rt

#endif  // ADRENO_RT_ARTIFACT_FILES_H_
