// Fuzz target for the files an app's harness reads from storage it cannot trust (issue 46): params.npz, an input
// .npy, the program-binary blob, manifest.json and plan.json. One kind per run, chosen by ADRENO_FUZZ_KIND (npz, npy,
// blob, manifest, plan); ADRENO_FUZZ_CORPUS is the corpus root, whose plan/ and manifest/ seeds give the other file
// when a manifest or a plan is fuzzed. A reader may refuse its input (std::runtime_error, std::invalid_argument: the
// harness's one-line error); anything else, a sanitizer report, another exception escaping, a crash, is a finding.
// Built with libFuzzer (clang) or with mutation_driver.cc (g++), under ASan and UBSan: native/Makefile `fuzz`.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "artifact_spec.h"
#include "atomic_file.h"
#include "blob_file.h"
#include "integrity.h"
#include "json_fields.h"
#include "npy.h"
#include "serialized_module.h"
#include "weight_forms.h"
#include "weights.h"

namespace {

using namespace adreno_harness;

enum class Kind { kNpz, kNpy, kBlob, kManifest, kPlan };

const char kBlobKey[] = "fuzz-platform|fuzz-device|fuzz-driver\nfuzz-kernels";  // the blob seeds' key

struct Context {
  Kind kind;
  std::string scratch;  // a file the readers that take a path read
  json::Object plan, manifest;  // the other file of a manifest or plan case
};

Context* context = nullptr;

// Each of the forms a member could be stored in, with the plan shape that form gives, rebuilt: the weight_forms paths
// a plan can reach for this member.
void RebuildEveryForm(const std::string& name, const NpyView& view) {
  const std::vector<int64_t>& s = view.shape;
  const bool integer = view.dtype == "int8" || view.dtype == "uint8";
  std::vector<std::pair<StoredForm, std::vector<int64_t>>> cases;
  StoredForm plain;
  cases.push_back({plain, s});
  if (s.size() == 2) {
    StoredForm t;
    t.transform = "transpose";
    cases.push_back({t, {s[1], s[0]}});
  }
  if (s.size() == 4) {
    StoredForm packed;
    packed.packed = true;
    cases.push_back({packed, {(s[0] + 3) / 4, (s[1] + 3) / 4 * 4, s[2], s[3], 4}});
    for (const char* transform : {"winograd2", "winograd4"}) {
      StoredForm w;
      w.transform = transform;
      const int64_t alpha = transform[8] == '2' ? 4 : 6;
      cases.push_back({w, {alpha, alpha, s[0], s[1]}});
    }
  }
  for (auto& [form, shape] : cases) {
    if (integer) {
      form.quantized = true;
      form.axis = s.empty() ? -1 : 0;
      const size_t extent = s.empty() ? 1 : static_cast<size_t>(s[0]);
      if (extent > 4096) continue;
      form.scale.assign(extent, 0.5f);
      form.zero_point.assign(extent, 3);
    }
    try {
      ParamValues(name, view, form, shape);
    } catch (const std::runtime_error&) {
    }
    if (integer) {  // the same member as an integer op's int32 weight: scale 1, widened
      form.scale.assign(form.scale.size(), 1.0f);
      try {
        WidenedParamValues(name, view, form, shape);
      } catch (const std::runtime_error&) {
      }
    }
  }
}

void Write(const std::string& path, const uint8_t* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(data, 1, size, f) != size || std::fclose(f) != 0) std::abort();
}

void RunOne(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  switch (context->kind) {
    case Kind::kNpy:
      ParseNpy(text.data(), text.size(), "input.npy");
      return;
    case Kind::kNpz: {
      Write(context->scratch, data, size);
      WeightFile file(context->scratch);
      for (const auto& [name, view] : file.arrays()) RebuildEveryForm(name, view);
      return;
    }
    case Kind::kBlob: {
      Write(context->scratch, data, size);
      std::string why;
      if (auto sections = LoadBlobFile(context->scratch, kBlobKey, &why)) {
        for (const auto& [section, payload] : *sections) adreno_native::ParseProgramBlob(payload);
      }
      // the payload parser as one who recomputed the digest would reach it: after the headers of a blob with this
      // key whose first section's key is a SHA-256 hex (64 characters)
      const size_t header = 14 + 4 + 8 + (sizeof(kBlobKey) - 1) + 8 + 8 + 64 + 8 + 32;
      if (size > header) adreno_native::ParseProgramBlob(text.substr(header));
      return;
    }
    case Kind::kManifest: {
      json::Object manifest = ParseJsonObject(text, "manifest.json");
      try {
        VerifyRunDigest(manifest);
      } catch (const std::runtime_error&) {
      }
      ReadArtifactSpec(context->plan, manifest);
      return;
    }
    case Kind::kPlan:
      ReadArtifactSpec(ParseJsonObject(text, "plan.json"), context->manifest);
      return;
  }
}

json::Object Seed(const std::string& root, const char* kind) {
  return ParseJsonObject(ReadFile(root + "/" + kind + "/seed.json"), std::string(kind) + " seed");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* kind = std::getenv("ADRENO_FUZZ_KIND");
  const char* root = std::getenv("ADRENO_FUZZ_CORPUS");
  const std::string name = kind ? kind : "";
  static Context made;
  made.kind = name == "npz" ? Kind::kNpz : name == "npy" ? Kind::kNpy : name == "blob" ? Kind::kBlob
            : name == "manifest" ? Kind::kManifest : name == "plan" ? Kind::kPlan : static_cast<Kind>(-1);
  if (static_cast<int>(made.kind) < 0 || root == nullptr) {
    std::fprintf(stderr, "set ADRENO_FUZZ_KIND (npz, npy, blob, manifest, plan) and ADRENO_FUZZ_CORPUS\n");
    std::exit(2);
  }
  context = &made;
  made.scratch = (std::getenv("TMPDIR") ? std::string(std::getenv("TMPDIR")) : "/tmp") + "/adreno-fuzz-" +
                 std::to_string(getpid());
  std::atexit([] { unlink(context->scratch.c_str()); });
  made.plan = Seed(root, "plan");
  made.manifest = Seed(root, "manifest");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    RunOne(data, size);
  } catch (const std::runtime_error&) {  // a refusal: the harness's one line
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
