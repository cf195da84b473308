// The model's OpenCL programs across starts, through the blob file (native/harness/blob_file.h): at open, the
// binaries of an earlier start are offered to the plugin when the file's key (this device, a hash of the host
// library's OpenCL module) and checksum hold; anything else is rejected, with the reason kept for the report, and
// the programs are built from source at the first run. After a first run that built anything from source, the
// blob is rewritten atomically (when the caller allows it).
#ifndef ADRENO_RT_PROGRAM_CACHE_H_
#define ADRENO_RT_PROGRAM_CACHE_H_

#include <tvm/ffi/extra/module.h>

#include <cstdint>
#include <optional>
#include <string>

#include "adreno_rt.h"

namespace adreno_rt {

struct ProgramCounts {
  int64_t from_source = 0, from_binary = 0, rejected = 0;
};

class ProgramCache {
 public:
  // `executable`: the host library's module (its OpenCL module is found among its imports; a library with no
  // kernels has none, and the blob is not used). `blob_path` empty: no blob.
  ProgramCache(const tvm::ffi::Module& executable, const std::string& device_identity, const std::string& blob_path,
               bool write_blob);

  // Offers the blob's binaries (at open, before the first run builds anything).
  void Offer();
  // After the first run: rewrites the blob when that run built programs from source. A failure to write is kept
  // (write_error), not thrown: the run's outputs are good.
  void AfterFirstRun();

  ProgramCounts Counts() const;
  adreno_rt_blob_state state() const { return state_; }
  const std::string& rejected_because() const { return rejected_because_; }
  bool written() const { return written_; }
  const std::string& write_error() const { return write_error_; }

 private:
  std::optional<tvm::ffi::Module> kernels_;
  std::string key_, blob_path_;
  bool write_blob_;
  adreno_rt_blob_state state_ = ADRENO_RT_BLOB_NOT_USED;
  std::string rejected_because_, write_error_;
  bool written_ = false;
};

}  // namespace adreno_rt

#endif  // ADRENO_RT_PROGRAM_CACHE_H_
