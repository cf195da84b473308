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

// An artifact of several shape sets (adreno/artifact/shape_sets.py) keeps a plan.json and a host library per set
// under shapes/ and none at the top. The library does not choose a set: it refuses the artifact in these words
// rather than in those of the first file it misses, and never runs one set as if it were the model.
void RefuseShapeSets(const json::Object& manifest, const std::string& dir) {
  auto sets = manifest.find(tvm::ffi::String("shape_sets"));
  if (sets == manifest.end()) return;
  auto listed = (*sets).second.try_cast<json::Array>();
  Bad(dir + " holds several shape sets" + (listed ? " (" + std::to_string(listed->size()) + ")" : std::string()) +
      "; the app library runs an artifact of one: run it with `adreno run` or the Python API, or compile one shape "
      "per artifact (docs/shapes.md)");
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
    RefuseShapeSets(files.manifest, dir);
    Timed(verify_ms, [&] { adreno_harness::VerifyRunDigest(files.manifest); });
    auto library = files.manifest.find(tvm::ffi::String("host_library"));
    auto name = library == files.manifest.end() ? std::nullopt : (*library).second.try_cast<tvm::ffi::String>();
    if (!name || std::string(*name) != "lib.so") {
      Bad(dir + " has no loadable host library (manifest host_library: " +
          (name ? std::string(*name) : std::string("none")) + "); compile with --host native");
    }
    const json::Object plan = ReadJson(dir, "plan.json", &files.manifest, verify_ms);
    const adreno_harness::ArtifactSpec spec = adreno_harness::ReadArtifactSpec(plan, files.manifest);
    Timed(verify_ms, [&] { adreno_harness::CheckKernelContracts(dir, plan, files.manifest); });
    const std::string library_bytes = adreno_harness::ReadFile(dir + "/lib.so");
    Timed(verify_ms, [&] {
      adreno_harness::VerifyListedFile(files.manifest, "lib.so", library_bytes.data(), library_bytes.size());
    });
    // after its size and SHA-256, as every file is checked before use; a library that passes them and still maps
    // past its end (a manifest rewritten with it) would die of SIGBUS at the first page dlopen did not back
    // (elf_file.h)
    const std::string elf_problem = adreno_harness::ElfProblem(dir + "/lib.so");
    if (!elf_problem.empty()) Bad(dir + "/lib.so " + elf_problem + ": compile the artifact again");
    files.inputs = Ports(spec.inputs);
    files.outputs = Ports(spec.outputs);
    if (!files.outputs.empty() && adreno_harness::IsIndexFlags(files.manifest, files.outputs.back().tensor)) {
      files.index_flags = files.outputs.back();
      files.outputs.pop_back();
    }
    files.params = spec.params;
    return files;
  });
}

}  // namespace adreno_rt
