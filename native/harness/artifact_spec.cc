#include "artifact_spec.h"

#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>

#include "index_checks.h"

namespace adreno_harness {

namespace {

// the dtypes the harness moves (npy.h) and the scopes adreno writes (adreno.artifact.check.SCOPES)
const std::set<std::string> kDtypes = {"float32", "float16", "int64", "int32", "int8", "uint8", "bool"};
const std::set<std::string> kScopes = {"global", "global.texture", "global.texture-nhwc", "global.texture-weight"};
const std::set<std::string> kTransforms = {"none", "winograd2", "winograd4", "transpose"};

// object[key] is present and not null (plan.json writes null for a param without an image or a stored form)
bool Given(const json::Object& object, const char* key) {
  return Has(object, key) && Field(object, key, "").type_index() != tvm::ffi::TypeIndex::kTVMFFINone;
}

std::string Dtype(const json::Object& spec, const std::string& where) {
  std::string dtype = StringField(spec, "dtype", where);
  if (!kDtypes.count(dtype)) throw std::runtime_error(where + ": dtype " + dtype + " is not one the harness moves");
  return dtype;
}

std::vector<Port> Ports(const json::Object& plan, const json::Object& tensors, const json::Object& manifest,
                        const char* which) {
  const json::Object named = ObjectField(manifest, which, "manifest.json");
  std::map<std::string, std::string> onnx_name;  // tensor -> ONNX name
  std::map<std::string, json::Object> recorded;  // tensor -> the manifest's entry
  for (const auto& [key, entry] : named) {
    const std::string name = AsString(key, std::string("manifest.json ") + which + " key");
    const std::string where = std::string("manifest.json ") + which + " " + name;
    const json::Object object = AsObject(entry, where);
    const std::string tensor = Has(object, "tensor") ? StringField(object, "tensor", where) : name;
    if (onnx_name.count(tensor)) throw std::runtime_error(where + ": tensor " + tensor + " is named twice");
    onnx_name[tensor] = name;
    recorded[tensor] = object;
  }
  std::vector<Port> ports;
  size_t flags = 0;
  for (const json::Value& item : ArrayField(plan, which, "plan.json")) {
    Port port;
    port.tensor = AsString(item, std::string("plan.json ") + which + " entry");
    const std::string where = "plan.json tensor " + port.tensor;
    const json::Object spec = ObjectField(tensors, port.tensor.c_str(), "plan.json tensors");
    port.dtype = Dtype(spec, where);
    port.shape = AsShape(Field(spec, "shape", where), where + " \"shape\"");
    auto entry = recorded.find(port.tensor);
    if (entry == recorded.end() && std::string(which) == "outputs" && IsIndexFlags(manifest, port.tensor)) {
      port.name = port.tensor;  // the index flags: checked after the run (index_checks.h), not one of the model's
      ports.push_back(port);
      ++flags;
      continue;
    }
    if (entry == recorded.end()) {
      throw std::runtime_error(std::string("manifest.json ") + which + " does not name plan tensor " + port.tensor);
    }
    port.name = onnx_name[port.tensor];
    const std::string named_where = std::string("manifest.json ") + which + " " + port.name;
    if (StringField(entry->second, "dtype", named_where) != port.dtype ||
        AsShape(Field(entry->second, "shape", named_where), named_where + " \"shape\"") != port.shape) {
      throw std::runtime_error(named_where + ": its dtype or shape differs from plan.json's");
    }
    ports.push_back(port);
  }
  if (ports.size() - flags != named.size()) {
    throw std::runtime_error(std::string("manifest.json records ") + std::to_string(named.size()) + " " + which +
                             ", plan.json has " + std::to_string(ports.size()));
  }
  return ports;
}

// adreno.artifact.weights.Quantization: a float32 scale and an int32 zero point per tensor or per index of `axis`
void ReadQuantization(const json::Object& quantization, const std::string& where, StoredForm* form) {
  form->quantized = true;
  for (const json::Value& x : ArrayField(quantization, "scale", where)) {
    const double scale = AsNumber(x, where + " scale");
    if (!std::isfinite(scale) || std::fabs(scale) > std::numeric_limits<float>::max()) {
      throw std::runtime_error(where + ": scale " + std::to_string(scale) + " is no finite float32");
    }
    form->scale.push_back(static_cast<float>(scale));  // a float32's exact decimal: exact
  }
  for (const json::Value& x : ArrayField(quantization, "zero_point", where)) {
    const int64_t zero = AsInt(x, where + " zero_point");
    if (zero < -255 || zero > 255) throw std::runtime_error(where + ": zero_point " + std::to_string(zero) +
                                                            " is outside an int8 / uint8 weight's range");
    form->zero_point.push_back(static_cast<int32_t>(zero));
  }
  const json::Value axis = Field(quantization, "axis", where);
  form->axis = axis.type_index() == tvm::ffi::TypeIndex::kTVMFFINone ? -1 : AsInt(axis, where + " axis");
  if (form->axis < -1) throw std::runtime_error(where + ": axis " + std::to_string(form->axis) + " is negative");
}

ParamSpec ReadParam(const std::string& name, const json::Object& tensors) {
  const std::string where = "plan.json tensor " + name;
  const json::Object spec = ObjectField(tensors, name.c_str(), "plan.json tensors");
  if (StringField(spec, "kind", where) != "param") throw std::runtime_error(where + " is not a param");
  ParamSpec param;
  param.name = name;
  param.scope = StringField(spec, "scope", where);
  if (!kScopes.count(param.scope)) throw std::runtime_error(where + ": scope " + param.scope + " is unknown");
  param.dtype = Dtype(spec, where);
  param.shape = AsShape(Field(spec, "shape", where), where + " \"shape\"");
  // an image exactly when the scope is a texture scope: the kernels were compiled for one or the other
  const bool image = Given(spec, "image");
  if (image != (param.scope != "global")) {
    throw std::runtime_error(where + ": scope " + param.scope + (image ? " with" : " without") + " an image");
  }
  if (image) {
    const std::string pixels = StringField(ObjectField(spec, "image", where), "channel_type", where + " image");
    if (pixels != "float32" && pixels != "float16") {
      throw std::runtime_error(where + " image: channel_type " + pixels + " is neither float32 nor float16");
    }
    param.half_pixels = pixels == "float16";
  }
  if (Given(spec, "stored")) {
    const std::string form_where = where + " stored";
    const json::Object form = ObjectField(spec, "stored", where);
    param.stored = true;
    param.form.transform = StringField(form, "transform", form_where);
    if (!kTransforms.count(param.form.transform)) {
      throw std::runtime_error(form_where + ": transform " + param.form.transform + " is unknown");
    }
    param.form.packed = BoolField(form, "packed", form_where);
    if (Given(form, "quantization")) {
      ReadQuantization(ObjectField(form, "quantization", form_where), form_where + " quantization", &param.form);
    }
  }
  const bool widened = param.stored && !param.half_pixels && param.dtype == "int32" && WidensToInt32(param.form);
  if ((param.stored || param.half_pixels) && param.dtype != "float32" && !widened) {
    throw std::runtime_error(where + ": a " + param.dtype + " param stored in another form or as half pixels (an "
                             "int32 one only as an int8 / uint8 member of scale 1)");
  }
  return param;
}

}  // namespace

ArtifactSpec ReadArtifactSpec(const json::Object& plan, const json::Object& manifest) {
  const json::Object tensors = ObjectField(plan, "tensors", "plan.json");
  ArtifactSpec spec;
  spec.inputs = Ports(plan, tensors, manifest, "inputs");
  spec.outputs = Ports(plan, tensors, manifest, "outputs");
  if (!Has(manifest, "host_params")) {
    throw std::runtime_error("manifest.json has no host_params: compiled by an adreno whose host library embeds its "
                             "weights; recompile it");
  }
  std::set<std::string> seen;
  for (const json::Value& item : ArrayField(manifest, "host_params", "manifest.json")) {
    const std::string name = AsString(item, "manifest.json host_params entry");
    if (!seen.insert(name).second) throw std::runtime_error("manifest.json host_params names " + name + " twice");
    spec.params.push_back(ReadParam(name, tensors));
  }
  return spec;
}

}  // namespace adreno_harness
