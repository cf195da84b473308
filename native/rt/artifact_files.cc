#include "artifact_files.h"

#include <sys/stat.h>

#include <chrono>
#include <map>

#include "../harness/atomic_file.h"
#include "../harness/elf_file.h"
#include "../harness/index_checks.h"
#include "../harness/integrity.h"
#include "../harness/json_fields.h"
#include "../harness/kernel_contract.h"
#include "../harness/npy.h"
#include "../harness/sha256.h"
#include "rt_error.h"

namespace json = tvm::ffi::json;

namespace adreno_rt {

namespace {

[[noreturn]] void Bad(const std::string& message) { throw RtError(ADRENO_RT_BAD_ARTIFACT, message); }

// Calls `verify` and adds its milliseconds to *total: the start's price of proving the artifact whole.
template <typename Verify>
void Timed(double* total, const Verify& verify) {
  auto since = std::chrono::steady_clock::now();
  verify();
  *total += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since).count();
}

// The artifact's JSON file `name`, whole (plan.json: of the size and SHA-256 the manifest lists).
json::Object ReadJson(const std::string& dir, const std::string& name, const json::Object* manifest,
                      double* verify_ms) {
  const std::string text = adreno_harness::ReadFile(dir + "/" + name);
  if (manifest != nullptr) {
    Timed(verify_ms, [&] { adreno_harness::VerifyListedFile(*manifest, name, text.data(), text.size()); });
  }
  return adreno_harness::ParseJsonObject(text, dir + "/" + name);
}

std::vector<Port> Ports(const std::vector<adreno_harness::Port>& described) {
  std::vector<Port> ports;
  for (const adreno_harness::Port& port : described) {
    Port ours{port.name, port.tensor, DtypeNamed(port.dtype), port.shape, 0};
    ours.bytes = ours.dtype.bytes;
    for (int64_t d : ours.shape) ours.bytes *= static_cast<size_t>(d);
    ports.push_back(ours);
  }
  return ports;
}

// A path the manifest gives for a file of the artifact: relative and inside it.
std::string Confined(const std::string& rel, const std::string& where) {
  if (rel.empty() || rel[0] == '/' || rel.find("..") != std::string::npos) {
    Bad(where + ": path " + rel + " leads outside the artifact; recompile the model");
  }
  return rel;
}

// adreno.artifact.shape_sets.SET_FIELDS: the fields a set's own manifest gives, over the shared ones
const char* const kSetFields[] = {"inputs", "outputs", "host_library", "host_params", "kernels", "textures", "refused",
                                  "weight_storage", "tuned_kernels", "records_elsewhere", "records_skipped",
                                  "model_defaults", "empty_outputs", "orchestration", "compile_seconds",
                                  "index_checks"};

json::Object Overlay(const json::Object& shared, const json::Object& own) {
  json::Object overlay;
  for (const auto& [key, value] : shared) overlay.Set(key, value);
  for (const char* key : kSetFields) {
    if (adreno_harness::Has(own, key)) overlay.Set(tvm::ffi::String(key), adreno_harness::Field(own, key, ""));
  }
  return overlay;
}

// Set `index` described: `plan_rel` proved and read, its ports and weights from the plan and `manifest` (the set's).
ShapeSetFiles ReadSet(const std::string& dir, const json::Object& manifest, const std::string& plan_rel,
                      double* verify_ms) {
  ShapeSetFiles set;
  set.manifest = manifest;
  auto library = manifest.find(tvm::ffi::String("host_library"));
  auto name = library == manifest.end() ? std::nullopt : (*library).second.try_cast<tvm::ffi::String>();
  const std::string rel = name ? std::string(*name) : std::string();
  if (rel != "lib.so" && (rel.size() < 7 || rel.compare(rel.size() - 7, 7, "/lib.so") != 0)) {
    Bad(dir + " has no loadable host library (manifest host_library: " + (name ? rel : std::string("none")) +
        "); compile with --host native");
  }
  set.library = Confined(rel, "manifest.json host_library");
  set.plan = ReadJson(dir, plan_rel, &manifest, verify_ms);
  const adreno_harness::ArtifactSpec spec = adreno_harness::ReadArtifactSpec(set.plan, manifest);
  set.inputs = Ports(spec.inputs);
  set.outputs = Ports(spec.outputs);
  if (!set.outputs.empty() && adreno_harness::IsIndexFlags(manifest, set.outputs.back().tensor)) {
    set.index_flags = set.outputs.back();
    set.outputs.pop_back();
  }
  set.params = spec.params;
  return set;
}

// Every set takes the model's inputs in the same order and dtypes (only their shapes differ): what the C API's
// adreno_rt_select_shapes relies on.
void CheckSameInputs(const std::vector<ShapeSetFiles>& sets) {
  for (size_t i = 1; i < sets.size(); ++i) {
    bool same = sets[i].inputs.size() == sets[0].inputs.size();
    for (size_t k = 0; same && k < sets[i].inputs.size(); ++k) {
      same = sets[i].inputs[k].name == sets[0].inputs[k].name &&
             sets[i].inputs[k].dtype.name == sets[0].inputs[k].dtype.name;
    }
    if (!same) Bad("manifest.json shape set " + std::to_string(i) + " takes other inputs than set 0; recompile");
  }
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

ArtifactFiles ReadArtifactFiles(const std::string& dir, double* verify_ms) {
  struct stat info;
  if (stat(dir.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    Bad(dir + ": cannot open it (no such artifact directory)");
  }
  return Stage(ADRENO_RT_BAD_ARTIFACT, "", [&] {
    ArtifactFiles files;
    files.manifest = ReadJson(dir, "manifest.json", nullptr, verify_ms);
    Timed(verify_ms, [&] { adreno_harness::VerifyRunDigest(files.manifest); });
    if (!adreno_harness::Has(files.manifest, "shape_sets")) {
      files.sets.push_back(ReadSet(dir, files.manifest, "plan.json", verify_ms));
      return files;
    }
    const json::Array entries = adreno_harness::ArrayField(files.manifest, "shape_sets", "manifest.json");
    if (entries.size() < 2) {
      Bad("manifest.json: its shape_sets list " + std::to_string(entries.size()) + " set(s); an artifact of several "
          "lists two or more: recompile the model");
    }
    for (size_t i = 0; i < entries.size(); ++i) {
      const std::string where = "manifest.json shape_sets " + std::to_string(i);
      const json::Object entry = adreno_harness::AsObject(entries[i], where);
      const std::string plan = Confined(adreno_harness::StringField(entry, "plan", where), where + " plan");
      const json::Object own = adreno_harness::ObjectField(entry, "manifest", where);
      files.sets.push_back(ReadSet(dir, Overlay(files.manifest, own), plan, verify_ms));
    }
    CheckSameInputs(files.sets);
    return files;
  });
}

void VerifySetCode(const std::string& dir, const ArtifactFiles& files, size_t index, double* verify_ms) {
  const ShapeSetFiles& set = files.sets.at(index);
  Stage(ADRENO_RT_BAD_ARTIFACT, "", [&] {
    Timed(verify_ms, [&] { adreno_harness::CheckKernelContracts(dir, set.plan, set.manifest); });
    const std::string library_bytes = adreno_harness::ReadFile(dir + "/" + set.library);
    Timed(verify_ms, [&] {
      adreno_harness::VerifyListedFile(set.manifest, set.library, library_bytes.data(), library_bytes.size());
    });
  });
  // after its size and SHA-256, as every file is checked before use; a library that passes them and still maps
  // past its end (a manifest rewritten with it) would die of SIGBUS at the first page dlopen did not back
  // (elf_file.h)
  const std::string elf_problem = adreno_harness::ElfProblem(dir + "/" + set.library);
  if (!elf_problem.empty()) Bad(dir + "/" + set.library + " " + elf_problem + ": compile the artifact again");
}

std::string KernelsKey(const ArtifactFiles& files) {
  return Stage(ADRENO_RT_BAD_ARTIFACT, "", [&] {
    std::string listed;
    const json::Object entries = adreno_harness::ObjectField(files.manifest, "files", "manifest.json");
    for (const ShapeSetFiles& set : files.sets) {
      const json::Object entry = adreno_harness::ObjectField(entries, set.library.c_str(), "manifest.json files");
      listed += adreno_harness::StringField(entry, "sha256", "manifest.json files " + set.library) + "\n";
    }
    return adreno_harness::Sha256Hex(listed.data(), listed.size());
  });
}

std::string ShapesLabel(const std::vector<Port>& inputs) {
  std::string text;
  for (const Port& port : inputs) {
    text += (text.empty() ? "" : ", ") + port.name + " " + adreno_harness::DimsText(port.shape);
  }
  return text;
}

}  // namespace adreno_rt
