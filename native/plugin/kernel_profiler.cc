#include "kernel_profiler.h"

namespace adreno_native {

KernelProfiler& KernelProfiler::Global() {
  static auto* profiler = new KernelProfiler();
  return *profiler;
}

void KernelProfiler::Record(const std::string& kernel, cl_event event) {
  std::lock_guard<std::mutex> lock(mutex_);
  launches_.emplace_back(kernel, ClEvent(event));
}

std::vector<std::pair<std::string, int64_t>> KernelProfiler::Take() {
  std::vector<std::pair<std::string, ClEvent>> launches;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    launches.swap(launches_);
  }
  std::vector<std::pair<std::string, int64_t>> times;
  for (auto& [kernel, event] : launches) {
    cl_event handle = event.get();
    CL_CALL(clWaitForEvents, 1, &handle);
    cl_ulong start = 0, end = 0;
    CL_CALL(clGetEventProfilingInfo, handle, CL_PROFILING_COMMAND_START, sizeof(start), &start, nullptr);
    CL_CALL(clGetEventProfilingInfo, handle, CL_PROFILING_COMMAND_END, sizeof(end), &end, nullptr);
    times.emplace_back(kernel, static_cast<int64_t>(end - start));
  }
  return times;
}

}  // namespace adreno_native
