#include "program_cache.h"

#include <tvm/ffi/container/array.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/string.h>

#include <cstdio>

#include "../harness/blob_file.h"
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

ProgramCache::ProgramCache(const ffi::Module& executable, const std::string& device_identity,
                           const std::string& blob_path, bool write_blob)
    : kernels_(FindModule(executable, "opencl")), blob_path_(blob_path), write_blob_(write_blob) {
  if (kernels_ && !blob_path_.empty()) {
    ffi::Bytes module_bytes = (*kernels_)->SaveToBytes();
    key_ = device_identity + "\n" + adreno_harness::Sha256Hex(module_bytes.data(), module_bytes.size());
  }
}

void ProgramCache::Offer() {
  if (key_.empty()) return;
  std::string why;
  std::optional<std::string> payload = adreno_harness::LoadBlobFile(blob_path_, key_, &why);
  if (!payload) {
    state_ = why == "absent" ? ADRENO_RT_BLOB_ABSENT : ADRENO_RT_BLOB_REJECTED;
    if (state_ == ADRENO_RT_BLOB_REJECTED) rejected_because_ = why;
    return;
  }
  int64_t taken = Stage(ADRENO_RT_DEVICE, "offering the blob's programs", [&] {
    return (*kernels_)->GetFunction("opencl.SetPreCompiledPrograms").value()(ffi::Bytes(*payload)).cast<int64_t>();
  });
  state_ = taken > 0 ? ADRENO_RT_BLOB_LOADED : ADRENO_RT_BLOB_REFUSED_BY_DRIVER;
}

ProgramCounts ProgramCache::Counts() const {
  ProgramCounts counts;
  if (!kernels_) return counts;
  std::string stats = (*kernels_)->GetFunction("adreno.opencl.program_stats").value()().cast<ffi::String>();
  long long source = 0, binary = 0, rejected = 0;
  if (std::sscanf(stats.c_str(), "from_source=%lld from_binary=%lld rejected=%lld", &source, &binary, &rejected) != 3) {
    throw RtError(ADRENO_RT_NO_RUNTIME, "the OpenCL plugin's program_stats reads \"" + stats + "\"");
  }
  counts.from_source = source;
  counts.from_binary = binary;
  counts.rejected = rejected;
  return counts;
}

void ProgramCache::AfterFirstRun() {
  if (key_.empty() || !write_blob_ || Counts().from_source == 0) return;
  try {
    ffi::Bytes blob = (*kernels_)->GetFunction("opencl.GetPreCompiledPrograms").value()().cast<ffi::Bytes>();
    adreno_harness::SaveBlobFile(blob_path_, key_, std::string(blob.data(), blob.size()));
    written_ = true;
  } catch (const std::exception& error) {
    write_error_ = FirstLine(error);
  }
}

}  // namespace adreno_rt
