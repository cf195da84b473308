// The run-time index checks of an artifact (adreno/artifact/index_checks.py): a compile clamps every run-time gather or
// scatter index into its tensor and sets the node's flag in one extra int32 output, the plan's last, which
// manifest.json's "index_checks" names with the nodes in flag order. A set flag means the input held an index ONNX
// makes an error: the run's outputs are not the model's, and the caller fails with the one line this throws.
#ifndef ADRENO_HARNESS_INDEX_CHECKS_H_
#define ADRENO_HARNESS_INDEX_CHECKS_H_

#include <tvm/ffi/extra/json.h>

#include <string>

#include "npy.h"

namespace adreno_harness {

// True when `tensor` is the manifest's index flags (so not one of the model's outputs).
bool IsIndexFlags(const tvm::ffi::json::Object& manifest, const std::string& tensor);

// Throws std::runtime_error naming the first flagged node (the words of adreno.artifact.index_checks.failure_line) when
// `flags`, the run's values of the plan's last output `last_tensor`, has one set; does nothing for an artifact
// without index checks, and refuses one whose manifest names another tensor.
void CheckIndexFlags(const tvm::ffi::json::Object& manifest, const std::string& last_tensor, const NpyArray& flags);

}  // namespace adreno_harness

#endif  // ADRENO_HARNESS_INDEX_CHECKS_H_
