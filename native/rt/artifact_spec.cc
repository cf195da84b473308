#include "artifact_spec.h"

#include <sys/stat.h>
#include <tvm/ffi/extra/json.h>

#include <map>
#include <optional>

#include "../harness/atomic_file.h"
#include "../harness/elf_file.h"
#include "../harness/index_checks.h"
#include "rt_error.h"

namespace ffi = tvm::ffi;

namespace adreno_rt {

namespace {

[[noreturn]] void Bad(const std::string& message) { throw RtError(ADRENO_RT_BAD_ARTIFACT, message); }

ffi::json::Object ReadJson(const std::string& path) {
  std::string text;
  try {
    text = adreno_harness::ReadFile(path);
  } catch (const std::exception& error) {
    Bad(error.what());
  }
  ffi::String error;
  ffi::json::Value value = ffi::json::Parse(text, &error);
  if (!error.empty()) Bad(path + ": not JSON (" + std::string(error) + ")");
  auto object = value.try_cast<ffi::json::Object>();
  if (!object) Bad(path + ": not a JSON object");
  return *object;
}

template <typename T>
T Member(const ffi::json::Object& object, const char* key, const std::string& where) {
  auto found = object.find(ffi::String(key));
  if (found == object.end()) Bad(where + " has no \"" + key + "\"");
  auto value = (*found).second.try_cast<T>();
  if (!value) Bad(where + ": \"" + key + "\" has the wrong type");
  return *value;
}

template <typename T>
std::optional<T> OptionalMember(const ffi::json::Object& object, const char* key) {
  auto found = object.find(ffi::String(key));
  return found == object.end() ? std::nullopt : (*found).second.try_cast<T>();
}

std::vector<int64_t> Shape(const ffi::json::Object& spec, const std::string& where) {
  std::vector<int64_t> shape;
  for (const ffi::Any& d : Member<ffi::json::Array>(spec, "shape", where)) {
    auto dim = d.try_cast<int64_t>();
    if (!dim || *dim < 0) Bad(where + ": a shape of other than non-negative integers");
    shape.push_back(*dim);
  }
  return shape;
}

size_t Elements(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

// The ports of `which` in the plan's order, named as manifest.json names them.
std::vector<Port> Ports(const ffi::json::Object& plan, const ffi::json::Object& manifest, const char* which) {
  ffi::json::Object tensors = Member<ffi::json::Object>(plan, "tensors", "plan.json");
  std::map<std::string, std::string> model_name;  // plan tensor -> the model's name
  for (const auto& [name, entry] : Member<ffi::json::Object>(manifest, which, "manifest.json")) {
    auto object = entry.try_cast<ffi::json::Object>();
    auto key = name.try_cast<ffi::String>();
    if (!object || !key) Bad(std::string("manifest.json: \"") + which + "\" holds other than objects");
    model_name[Member<ffi::String>(*object, "tensor", "manifest.json " + std::string(*key))] = *key;
  }
  std::vector<Port> ports;
  for (const ffi::Any& item : Member<ffi::json::Array>(plan, which, "plan.json")) {
    auto tensor = item.try_cast<ffi::String>();
    if (!tensor) Bad(std::string("plan.json: \"") + which + "\" holds other than names");
    Port port;
    port.tensor = *tensor;
    port.name = model_name.count(port.tensor) ? model_name[port.tensor] : port.tensor;
    const std::string where = "plan.json tensor " + port.tensor;
    ffi::json::Object spec = Member<ffi::json::Object>(tensors, port.tensor.c_str(), "plan.json tensors");
    port.dtype = DtypeNamed(Member<ffi::String>(spec, "dtype", where));
    port.shape = Shape(spec, where);
    port.bytes = port.dtype.bytes * Elements(port.shape);
    ports.push_back(port);
  }
  return ports;
}

adreno_harness::StoredForm StoredFormOf(const ffi::json::Object& stored, const std::string& where) {
  adreno_harness::StoredForm form;
  form.transform = Member<ffi::String>(stored, "transform", where);
  form.packed = Member<bool>(stored, "packed", where);
  if (auto quantization = OptionalMember<ffi::json::Object>(stored, "quantization")) {
    form.quantized = true;
    for (const ffi::Any& x : Member<ffi::json::Array>(*quantization, "scale", where + " quantization")) {
      auto value = x.try_cast<double>();
      if (!value) Bad(where + " quantization: a scale that is not a number");
      form.scale.push_back(static_cast<float>(*value));  // a float32's exact decimal: exact
    }
    for (const ffi::Any& x : Member<ffi::json::Array>(*quantization, "zero_point", where + " quantization")) {
      auto value = x.try_cast<int64_t>();
      if (!value) Bad(where + " quantization: a zero point that is not an integer");
      form.zero_point.push_back(static_cast<int32_t>(*value));
    }
    auto axis = OptionalMember<int64_t>(*quantization, "axis");
    form.axis = axis ? *axis : -1;
  }
  return form;
}

std::vector<WeightSpec> Weights(const ffi::json::Object& plan, const ffi::json::Object& manifest,
                                const std::string& dir) {
  auto order = OptionalMember<ffi::json::Array>(manifest, "host_params");
  if (!order) Bad(dir + " was compiled by an adreno whose host library embeds its weights; recompile it");
  ffi::json::Object tensors = Member<ffi::json::Object>(plan, "tensors", "plan.json");
  std::vector<WeightSpec> weights;
  for (const ffi::Any& item : *order) {
    auto name = item.try_cast<ffi::String>();
    if (!name) Bad("manifest.json: \"host_params\" holds other than names");
    WeightSpec weight;
    weight.name = *name;
    const std::string where = "plan.json tensor " + weight.name;
    ffi::json::Object spec = Member<ffi::json::Object>(tensors, weight.name.c_str(), "plan.json tensors");
    weight.scope = Member<ffi::String>(spec, "scope", where);
    weight.dtype = Member<ffi::String>(spec, "dtype", where);
    weight.shape = Shape(spec, where);
    // the stored form (adreno/weights.py): absent or null for a param stored as it is
    if (auto stored = OptionalMember<ffi::json::Object>(spec, "stored")) {
      weight.stored_otherwise = true;
      weight.form = StoredFormOf(*stored, where + " stored");
    }
    if (auto image = OptionalMember<ffi::json::Object>(spec, "image")) {
      weight.half_pixels = Member<ffi::String>(*image, "channel_type", where + " image") == "float16";
    }
    if ((weight.stored_otherwise || weight.half_pixels) && weight.dtype != "float32") {
      Bad(weight.name + ": a " + weight.dtype + " param stored in another form");
    }
    DtypeNamed(weight.dtype);
    weights.push_back(weight);
  }
  return weights;
}

}  // namespace

Dtype DtypeNamed(const std::string& name) {
  static const std::map<std::string, Dtype> table = {
      {"float32", {"float32", {kDLFloat, 32, 1}, ADRENO_RT_FLOAT32, 4}},
      {"float16", {"float16", {kDLFloat, 16, 1}, ADRENO_RT_FLOAT16, 2}},
      {"int64", {"int64", {kDLInt, 64, 1}, ADRENO_RT_INT64, 8}},
      {"int32", {"int32", {kDLInt, 32, 1}, ADRENO_RT_INT32, 4}},
      {"int8", {"int8", {kDLInt, 8, 1}, ADRENO_RT_INT8, 1}},
      {"uint8", {"uint8", {kDLUInt, 8, 1}, ADRENO_RT_UINT8, 1}},
      {"bool", {"bool", {kDLBool, 8, 1}, ADRENO_RT_BOOL, 1}}};
  auto found = table.find(name);
  if (found == table.end()) Bad("dtype " + name + " is not one the library moves");
  return found->second;
}

ArtifactSpec ReadArtifactSpec(const std::string& dir) {
  struct stat info;
  if (stat(dir.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    Bad(dir + ": cannot open it (no such artifact directory)");
  }
  ffi::json::Object plan = ReadJson(dir + "/plan.json");
  ffi::json::Object manifest = ReadJson(dir + "/manifest.json");
  auto library = OptionalMember<ffi::String>(manifest, "host_library");
  if (!library || std::string(*library) != "lib.so") {
    Bad(dir + " has no loadable host library (manifest host_library: " +
        (library ? std::string(*library) : std::string("none")) + "); compile with --host native");
  }
  const std::string elf_problem = Stage(ADRENO_RT_BAD_ARTIFACT, "", [&] {
    return adreno_harness::ElfProblem(dir + "/lib.so");
  });
  if (!elf_problem.empty()) Bad(dir + "/lib.so " + elf_problem + ": compile the artifact again");
  ArtifactSpec spec;
  spec.manifest = manifest;
  spec.inputs = Ports(plan, manifest, "inputs");
  spec.outputs = Ports(plan, manifest, "outputs");
  const bool flagged = Stage(ADRENO_RT_BAD_ARTIFACT, "", [&] {
    return !spec.outputs.empty() && adreno_harness::IsIndexFlags(manifest, spec.outputs.back().tensor);
  });
  if (flagged) {
    spec.index_flags = spec.outputs.back();
    spec.outputs.pop_back();
  }
  spec.weights = Weights(plan, manifest, dir);
  return spec;
}

}  // namespace adreno_rt
