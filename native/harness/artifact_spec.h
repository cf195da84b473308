// What the harness reads of an artifact's manifest.json and plan.json, read once, every field checked: the model's
// inputs and outputs (their ONNX names, plan tensors, dtypes, shapes) and the weights `main` takes (manifest
// host_params, in order), each with the scope, dtype, shape, stored form and image pixels the plan gives it.
// A field that is absent, of another type, out of range or inconsistent with the other file is a std::runtime_error
// of one line naming the file and the field, before anything is allocated or uploaded.
#ifndef ADRENO_HARNESS_ARTIFACT_SPEC_H_
#define ADRENO_HARNESS_ARTIFACT_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "json_fields.h"
#include "weight_forms.h"

namespace adreno_harness {

// One model input or output: its ONNX name (the user's), the plan tensor, shape and dtype.
struct Port {
  std::string name, tensor, dtype;
  std::vector<int64_t> shape;
};

// One weight of `main`: a plan param.
struct ParamSpec {
  std::string name, dtype, scope;  // scope: "global" (a buffer) or a texture scope (an image)
  std::vector<int64_t> shape;
  bool stored = false;  // params.npz holds another form of it (`form`), rebuilt at load
  StoredForm form;
  bool half_pixels = false;  // an fp16 artifact's image: a float32 tensor uploaded as half pixels
};

struct ArtifactSpec {
  std::vector<Port> inputs, outputs;  // in the plan's order (the VM's argument and result order)
  std::vector<ParamSpec> params;      // in host_params order (after the inputs)
};

ArtifactSpec ReadArtifactSpec(const json::Object& plan, const json::Object& manifest);

}  // namespace adreno_harness

#endif  // ADRENO_HARNESS_ARTIFACT_SPEC_H_
