// TVM's OpenCL runtime in this process: adreno's plugin (libtvm_runtime_opencl.so), loaded once, and its devices.
// An app may link the plugin instead; loading it by path is what lets the library say why it is missing.
#ifndef ADRENO_RT_OPENCL_RUNTIME_H_
#define ADRENO_RT_OPENCL_RUNTIME_H_

#include <string>

namespace adreno_rt {

// libtvm_runtime_opencl.so in the directory libadreno_rt.so was loaded from.
std::string PluginBesideLibrary();

// Loads the plugin at `path` (RTLD_GLOBAL: it registers TVM's OpenCL device API) unless TVM's runtime already has
// adreno's OpenCL functions; throws RtError(NO_RUNTIME) naming the path and the loader's error, or when TVM's runtime
// has an OpenCL device API of its own (the plugin's registration of a second one aborts the process).
void RequirePlugin(const std::string& path);

// The plugin's index of the device and its "platform|device|driver": the first whose identity contains `name`
// when `name` is not empty, else the `index`-th. Throws RtError(DEVICE) listing the devices there are.
int SelectDevice(int index, const std::string& name, std::string* identity);

}  // namespace adreno_rt

#endif  // ADRENO_RT_OPENCL_RUNTIME_H_
