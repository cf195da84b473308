#include "program_cache.h"

#include <tvm/ffi/container/array.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/string.h>

#include <cstdio>

#include "../harness/sha256.h"
#include "rt_error.h"

namespace ffi = tvm::ffi;

namespace adreno_rt {

namespace {

// The module of `kind` in the import tree under `root` (the host library's OpenCL kernels), if any.
std::optional<ffi::Module> FindModule(const ffi::Module& root, const std::string& kind) {
  if (root->kind() == kind) return root;
  for (const ffi::Any& child : root->imports()) {
    if (auto found = FindModule(child.cast<ffi::Module>(), kind)) return found;
  }
  return std::nullopt;
}

}  // namespace

ProgramCache::ProgramCache(const std::string& device_identity, const std::string& kernels_key,
                           const std::string& blob_path, bool write_blob)
    : blob_path_(blob_path), write_blob_(write_blob) {
  if (blob_path_.empty()) return;
  key_ = device_identity + "\n" + kernels_key;
  std::string why;
  std::optional<adreno_harness::BlobSections> sections = adreno_harness::LoadBlobFile(blob_path_, key_, &why);
  if (sections) {
    read_ = std::move(*sections);
    state_ = ADRENO_RT_BLOB_LOADED;
  } else {
    state_ = why == "absent" ? ADRENO_RT_BLOB_ABSENT : ADRENO_RT_BLOB_REJECTED;
    if (state_ == ADRENO_RT_BLOB_REJECTED) rejected_because_ = why;
  }
}

void ProgramCache::Attach(size_t set, const ffi::Module& executable) {
  std::optional<ffi::Module> kernels = FindModule(executable, "opencl");
  if (!kernels) return;
  SetKernels attached{*kernels, ""};
  if (!key_.empty()) {
    ffi::Bytes module_bytes = (*kernels)->SaveToBytes();
    attached.section = adreno_harness::Sha256Hex(module_bytes.data(), module_bytes.size());
  }
  sets_.insert_or_assign(set, attached);  // a set whose load failed after this is attached again
  if (key_.empty()) return;
  auto section = read_.find(attached.section);
  if (section == read_.end()) return;
  int64_t taken = Stage(ADRENO_RT_DEVICE, "offering the blob's programs", [&] {
    return attached.module->GetFunction("opencl.SetPreCompiledPrograms").value()(ffi::Bytes(section->second))
        .cast<int64_t>();
  });
  if (taken == 0) state_ = ADRENO_RT_BLOB_REFUSED_BY_DRIVER;
}

ProgramCounts ProgramCache::CountsOf(const ffi::Module& kernels) const {
  std::string stats = kernels->GetFunction("adreno.opencl.program_stats").value()().cast<ffi::String>();
  long long source = 0, binary = 0, rejected = 0;
  if (std::sscanf(stats.c_str(), "from_source=%lld from_binary=%lld rejected=%lld", &source, &binary, &rejected) != 3) {
    throw RtError(ADRENO_RT_NO_RUNTIME, "the OpenCL plugin's program_stats reads \"" + stats + "\"");
  }
  return {source, binary, rejected};
}

ProgramCounts ProgramCache::Counts() const {
  ProgramCounts total;
  for (const auto& [set, kernels] : sets_) {
    ProgramCounts counts = CountsOf(kernels.module);
    total.from_source += counts.from_source;
    total.from_binary += counts.from_binary;
    total.rejected += counts.rejected;
  }
  return total;
}

void ProgramCache::AfterFirstRun(size_t set) {
  auto ran = sets_.find(set);
  if (ran == sets_.end() || key_.empty() || !write_blob_ || CountsOf(ran->second.module).from_source == 0) return;
  try {
    adreno_harness::BlobSections sections = read_;
    for (const auto& [index, kernels] : sets_) {
      // this set's programs, and those of another set that built any (an earlier write of them may have failed);
      // never a set that has not run: its module would build every program to answer
      if (index != set && CountsOf(kernels.module).from_source == 0) continue;
      ffi::Bytes blob = kernels.module->GetFunction("opencl.GetPreCompiledPrograms").value()().cast<ffi::Bytes>();
      sections[kernels.section] = std::string(blob.data(), blob.size());
    }
    adreno_harness::SaveBlobFile(blob_path_, key_, sections);
    read_ = std::move(sections);
    written_ = true;
  } catch (const std::exception& error) {
    write_error_ = FirstLine(error);
  }
}

}  // namespace adreno_rt
