// Where the plugin's C++ errors cross into TVM: every std::exception becomes a TVM RuntimeError with its message,
// so Python sees one readable error instead of an abort.
#ifndef ADRENO_NATIVE_TVM_BOUNDARY_H_
#define ADRENO_NATIVE_TVM_BOUNDARY_H_

#include <tvm/ffi/error.h>

#include <exception>
#include <string>
#include <utility>

namespace adreno_native {

template <typename F>
auto AtTvmBoundary(F&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const tvm::ffi::Error&) {
    throw;
  } catch (const std::exception& err) {
    throw tvm::ffi::Error("RuntimeError", std::string("adreno OpenCL plugin: ") + err.what(), "");
  }
}

}  // namespace adreno_native

#endif  // ADRENO_NATIVE_TVM_BOUNDARY_H_
