// Per-kernel device times of TVM's launches, for `adreno run --runtime tvm`'s table: while recording, every launch
// gets an OpenCL event; taking the records waits for them and returns (kernel, nanoseconds) in launch order.
#ifndef ADRENO_NATIVE_KERNEL_PROFILER_H_
#define ADRENO_NATIVE_KERNEL_PROFILER_H_

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cl_handle.h"

namespace adreno_native {

class KernelProfiler {
 public:
  static KernelProfiler& Global();

  void SetRecording(bool on) { recording_ = on; }
  bool recording() const { return recording_; }
  // Keeps `event` (owned from now on) as the launch of `kernel`.
  void Record(const std::string& kernel, cl_event event);
  // Waits for the recorded launches and returns their device times, clearing the record.
  std::vector<std::pair<std::string, int64_t>> Take();

 private:
  std::atomic<bool> recording_{false};
  std::mutex mutex_;
  std::vector<std::pair<std::string, ClEvent>> launches_;
};

}  // namespace adreno_native

#endif  // ADRENO_NATIVE_KERNEL_PROFILER_H_
