#include "opencl_runtime.h"

#include <dlfcn.h>
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/string.h>

#include <mutex>

#include "rt_error.h"

namespace ffi = tvm::ffi;

namespace adreno_rt {

std::string PluginBesideLibrary() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&PluginBesideLibrary), &info) == 0 || info.dli_fname == nullptr) {
    return "libtvm_runtime_opencl.so";
  }
  std::string path = info.dli_fname;
  size_t slash = path.rfind('/');
  return (slash == std::string::npos ? std::string() : path.substr(0, slash + 1)) + "libtvm_runtime_opencl.so";
}

void RequirePlugin(const std::string& path) {
  static std::mutex loading;
  std::lock_guard<std::mutex> lock(loading);
  if (ffi::Function::GetGlobal("adreno.opencl.device_names")) return;  // loaded or linked already
  if (ffi::Function::GetGlobal("device_api.opencl")) {  // a second registration would abort inside dlopen
    throw RtError(ADRENO_RT_NO_RUNTIME, "TVM's runtime in this process has another OpenCL runtime (built with "
                                        "USE_OPENCL ON): adreno's plugin cannot be loaded beside it; link TVM's "
                                        "runtime without OpenCL");
  }
  if (dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
    const char* why = dlerror();
    throw RtError(ADRENO_RT_NO_RUNTIME, "cannot load TVM's OpenCL plugin " + path + " (" +
                                            (why ? why : "unknown error") + "); build it with `make install`");
  }
  if (!ffi::Function::GetGlobal("adreno.opencl.device_names")) {
    throw RtError(ADRENO_RT_NO_RUNTIME, path + " is not adreno's OpenCL plugin (no adreno.opencl.device_names)");
  }
}

int SelectDevice(int index, const std::string& name, std::string* identity) {
  auto names = Stage(ADRENO_RT_DEVICE, "listing OpenCL devices", [] {
    return ffi::Function::GetGlobal("adreno.opencl.device_names").value()().cast<ffi::Array<ffi::String>>();
  });
  if (names.empty()) throw RtError(ADRENO_RT_DEVICE, "no OpenCL device: install an OpenCL driver (PoCL on a CPU)");
  std::string seen;
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string device = names[i];
    if (name.empty() ? static_cast<int>(i) == index : device.find(name) != std::string::npos) {
      *identity = device;
      return static_cast<int>(i);
    }
    seen += (seen.empty() ? "" : "; ") + device;
  }
  throw RtError(ADRENO_RT_DEVICE, (name.empty() ? "no OpenCL device " + std::to_string(index)
                                                : "no OpenCL device named " + name) +
                                      " (" + std::to_string(names.size()) + " found: " + seen + ")");
}

}  // namespace adreno_rt
