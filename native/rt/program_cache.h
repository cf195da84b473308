// The model's OpenCL programs across starts, through the blob file (native/harness/blob_file.h). At open the file is
// read and kept when its key (this device, the artifact's kernels: every shape set's host library) and every
// section's digest hold; anything else is rejected, with the reason kept for the report. Each shape set's OpenCL
// module, when the set is first selected, is offered the section keyed by that module's bytes, if the file has one;
// what it lacks is built from source at the set's first run. After a set's first run that built anything from
// source, the file is rewritten atomically (when the caller allows it): the programs of every set that has run in
// this model, and the sections of the file read at open for the sets that have not.
#ifndef ADRENO_RT_PROGRAM_CACHE_H_
#define ADRENO_RT_PROGRAM_CACHE_H_

#include <tvm/ffi/extra/module.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "../harness/blob_file.h"
#include "adreno_rt.h"

namespace adreno_rt {

struct ProgramCounts {
  int64_t from_source = 0, from_binary = 0, rejected = 0;
};

class ProgramCache {
 public:
  // `kernels_key`: what the file's key says of the artifact beside the device (artifact_files.h's KernelsKey).
  // `blob_path` empty: no blob.
  ProgramCache(const std::string& device_identity, const std::string& kernels_key, const std::string& blob_path,
               bool write_blob);

  // Set `set`'s host library (`executable`; its OpenCL module is found among its imports, and a library with no
  // kernels has none): offered its section of the file, before its first run builds anything.
  void Attach(size_t set, const tvm::ffi::Module& executable);
  // After set `set`'s first run: rewrites the blob when that run built programs from source. A failure to write is
  // kept (write_error), not thrown: the run's outputs are good.
  void AfterFirstRun(size_t set);

  // The programs of every attached set so far.
  ProgramCounts Counts() const;
  adreno_rt_blob_state state() const { return state_; }
  const std::string& rejected_because() const { return rejected_because_; }
  bool written() const { return written_; }
  const std::string& write_error() const { return write_error_; }

 private:
  struct SetKernels {
    tvm::ffi::Module module;
    std::string section;  // the SHA-256 hex of the module's bytes: its section's key ("" without a blob)
  };
  ProgramCounts CountsOf(const tvm::ffi::Module& kernels) const;

  std::string key_, blob_path_;  // key_ empty: no blob
  bool write_blob_;
  adreno_harness::BlobSections read_;  // the file's sections, as read at open
  std::map<size_t, SetKernels> sets_;  // the attached sets that have kernels (counted with or without a blob)
  adreno_rt_blob_state state_ = ADRENO_RT_BLOB_NOT_USED;
  std::string rejected_because_, write_error_;
  bool written_ = false;
};

}  // namespace adreno_rt

#endif  // ADRENO_RT_PROGRAM_CACHE_H_
