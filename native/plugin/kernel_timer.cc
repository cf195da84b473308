// TVM's timer for OpenCL (`runtime.timer.opencl`), which `time_evaluator` uses on an OpenCL device: the time
// between Start and Stop is the device time of the kernels launched in between, summed from their launch events
// (kernel_profiler.h), not the host's wall clock around them. Without it TVM falls back to wall-clock time, which
// on a phone over RPC includes every launch's overhead.
#include <tvm/ffi/reflection/registry.h>
#include <tvm/runtime/timer.h>

#include "kernel_profiler.h"
#include "tvm_boundary.h"

namespace adreno_native {

namespace {

class KernelTimerNode final : public tvm::runtime::TimerNode {
 public:
  void Start() final {
    KernelProfiler::Global().Take();  // launches recorded before this timer are not its own
    KernelProfiler::Global().SetRecording(true);
  }
  void Stop() final { KernelProfiler::Global().SetRecording(false); }
  int64_t SyncAndGetElapsedNanos() final {
    return AtTvmBoundary([] {
      int64_t total = 0;
      for (const auto& launch : KernelProfiler::Global().Take()) total += launch.second;
      return total;
    });
  }
  TVM_FFI_DECLARE_OBJECT_INFO_FINAL("adreno.opencl.KernelTimer", KernelTimerNode, tvm::runtime::TimerNode);
};

}  // namespace

TVM_FFI_STATIC_INIT_BLOCK() {
  namespace refl = tvm::ffi::reflection;
  // Timer::Start(dev) calls Start() on what this returns.
  refl::GlobalDef().def("runtime.timer.opencl",
                        [](tvm::Device) { return tvm::runtime::Timer(tvm::ffi::make_object<KernelTimerNode>()); });
}

}  // namespace adreno_native
