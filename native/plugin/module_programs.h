// The OpenCL programs of one module on one device: built lazily from the module's source, or taken from
// precompiled binaries (the blob an app saves after its first start), never run unchecked.
//
// A program built from source holds every kernel of the module (one build, however many kernels). A blob entry
// is a program binary named after one kernel; it serves every kernel of the module it contains, so the blob of a
// source build is one entry, and a blob with one binary per kernel (what `adreno cache export` writes from an
// artifact's launch plan) works too. A binary is used only after it builds for this device and each kernel taken
// from it has the module's argument count; otherwise it is rejected (counted, with the reason) and those kernels
// are built from source when first launched.
#ifndef ADRENO_NATIVE_MODULE_PROGRAMS_H_
#define ADRENO_NATIVE_MODULE_PROGRAMS_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cl_handle.h"
#include "opencl_devices.h"
#include "serialized_module.h"

namespace adreno_native {

struct ProgramStats {
  int from_source = 0;       // programs built from the module's OpenCL C source
  int from_binary = 0;       // blob binaries that built and serve at least one kernel
  int rejected = 0;          // blob binaries refused (did not build, wrong kernels, or unreadable blob)
  std::string last_rejection;
};

class ModulePrograms {
 public:
  ModulePrograms(ClDevice& device, const SerializedModule& module) : device_(device), module_(module) {}

  // The kernel `name`, built on first use. The caller holds lock() while it sets arguments and enqueues.
  cl_kernel Kernel(const std::string& name);
  std::mutex& lock() { return mutex_; }

  // Offers a blob's binaries; returns how many were taken. A malformed blob is one rejection, never an error.
  int LoadBlob(const std::string& bytes);
  // The blob of every kernel's program (building what is not built yet).
  std::string SaveBlob();
  ProgramStats stats();

 private:
  struct Program {
    ClProgram program;
    std::vector<std::string> kernels;  // the module's kernels this program serves
  };
  std::shared_ptr<Program> BuildFromSource();
  std::string ValidateBinary(const std::string& name, const std::string& binary, std::shared_ptr<Program>* out);
  void Reject(const std::string& reason);

  ClDevice& device_;
  const SerializedModule& module_;
  std::mutex mutex_;
  std::vector<std::shared_ptr<Program>> programs_;
  std::map<std::string, std::shared_ptr<Program>> by_kernel_;
  std::map<std::string, ClKernel> kernels_;
  ProgramStats stats_;
};

}  // namespace adreno_native

#endif  // ADRENO_NATIVE_MODULE_PROGRAMS_H_
