// RAII for OpenCL handles: each handle type is released exactly once, by the wrapper that owns it.
#ifndef ADRENO_NATIVE_CL_HANDLE_H_
#define ADRENO_NATIVE_CL_HANDLE_H_

#include <utility>

#include "cl_check.h"

namespace adreno_native {

template <typename T, cl_int (*Release)(T)>
class ClHandle {
 public:
  ClHandle() = default;
  explicit ClHandle(T handle) : handle_(handle) {}
  ClHandle(const ClHandle&) = delete;
  ClHandle& operator=(const ClHandle&) = delete;
  ClHandle(ClHandle&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  ClHandle& operator=(ClHandle&& other) noexcept {
    if (this != &other) reset(std::exchange(other.handle_, nullptr));
    return *this;
  }
  ~ClHandle() { reset(); }

  T get() const { return handle_; }
  explicit operator bool() const { return handle_ != nullptr; }
  // Gives up ownership without releasing (the caller now owns the handle).
  T release() { return std::exchange(handle_, nullptr); }
  void reset(T handle = nullptr) {
    // A release failing at teardown cannot be acted on; the handle is gone either way.
    if (handle_ != nullptr) Release(handle_);
    handle_ = handle;
  }

 private:
  T handle_ = nullptr;
};

using ClContext = ClHandle<cl_context, clReleaseContext>;
using ClQueue = ClHandle<cl_command_queue, clReleaseCommandQueue>;
using ClMem = ClHandle<cl_mem, clReleaseMemObject>;
using ClProgram = ClHandle<cl_program, clReleaseProgram>;
using ClKernel = ClHandle<cl_kernel, clReleaseKernel>;
using ClEvent = ClHandle<cl_event, clReleaseEvent>;

}  // namespace adreno_native

#endif  // ADRENO_NATIVE_CL_HANDLE_H_
