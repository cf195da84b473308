// TVM's runtime module for OpenCL: what a host library's imported "opencl" module becomes when it is loaded.
//
// Registered as `ffi.Module.load_from_bytes.opencl`. The module keeps the serialized kernels (see
// serialized_module.h), builds their programs per device on first launch (module_programs.h), and launches a
// kernel with the thread-axis convention of TVM's host code: the kernel's arguments, then one extent per launch
// tag ("blockIdx.x" is a work-group count, "threadIdx.x" a work-group size), so OpenCL's global size along an axis
// is blockIdx * threadIdx and its local size threadIdx.
//
// Module functions besides the kernels:
//   opencl.GetPreCompiledPrograms() -> bytes     the program blob of the current device (builds what is missing)
//   opencl.SetPreCompiledPrograms(bytes) -> int  offers a blob; returns the binaries taken (bad ones rejected)
//   adreno.opencl.program_stats() -> str         "from_source=N from_binary=N rejected=N[ last=<reason>]"
// Globals: adreno.opencl.profile_kernels(bool) starts or stops recording every launch's device time;
// adreno.opencl.take_kernel_times() -> [[kernel, ns], ...] waits for the recorded launches and clears them.
#include <tvm/ffi/extra/module.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/reflection/registry.h>
#include <tvm/runtime/device_api.h>

#include <fstream>
#include <memory>
#include <mutex>
#include <vector>

#include "kernel_profiler.h"
#include "module_programs.h"
#include "tvm_boundary.h"

namespace adreno_native {

namespace ffi = tvm::ffi;

namespace {

// Where each launch tag's value goes: work-group counts (0-2) or work-group sizes (3-5).
std::vector<int> LaunchAxes(const KernelInfo& info) {
  std::vector<int> axes;
  for (const std::string& tag : info.launch_param_tags) {
    int base = tag.rfind("blockIdx.", 0) == 0 ? 0 : tag.rfind("threadIdx.", 0) == 0 ? 3 : -1;
    char axis = tag.empty() ? '?' : tag.back();
    if (base < 0 || axis < 'x' || axis > 'z') {
      throw std::invalid_argument("kernel " + info.name + ": launch tag '" + tag +
                                  "' is not blockIdx.x-z or threadIdx.x-z (dynamic shared memory is not supported)");
    }
    axes.push_back(base + (axis - 'x'));
  }
  return axes;
}

class OpenCLModuleNode final : public ffi::ModuleObj {
 public:
  explicit OpenCLModuleNode(SerializedModule module) : module_(std::move(module)) {}

  const char* kind() const final { return "opencl"; }
  int GetPropertyMask() const final { return ffi::Module::kBinarySerializable | ffi::Module::kRunnable; }

  ffi::Optional<ffi::Function> GetFunction(const ffi::String& name) final {
    ffi::ObjectPtr<ffi::Object> self = ffi::details::ObjectUnsafe::ObjectPtrFromUnowned<ffi::Object>(this);  // keeps the module alive
    std::string key = name;
    if (key == "opencl.GetPreCompiledPrograms") {
      return ffi::Function::FromTyped([this, self]() {
        return AtTvmBoundary([&] { return ffi::Bytes(Programs(CurrentDeviceId()).SaveBlob()); });
      });
    }
    if (key == "opencl.SetPreCompiledPrograms") {
      return ffi::Function::FromTyped([this, self](ffi::Bytes blob) {
        return AtTvmBoundary([&] {
          return static_cast<int64_t>(Programs(CurrentDeviceId()).LoadBlob(std::string(blob.data(), blob.size())));
        });
      });
    }
    if (key == "adreno.opencl.program_stats") {
      return ffi::Function::FromTyped([this, self]() {
        return AtTvmBoundary([&] {
          ProgramStats s = Programs(CurrentDeviceId()).stats();
          std::string text = "from_source=" + std::to_string(s.from_source) + " from_binary=" +
                             std::to_string(s.from_binary) + " rejected=" + std::to_string(s.rejected);
          return ffi::String(s.last_rejection.empty() ? text : text + " last=" + s.last_rejection);
        });
      });
    }
    const KernelInfo* info = module_.Find(key);
    if (info == nullptr) return std::nullopt;
    std::vector<int> axes = AtTvmBoundary([&] { return LaunchAxes(*info); });
    return ffi::Function::FromPacked([this, self, info, axes](ffi::PackedArgs args, ffi::Any*) {
      AtTvmBoundary([&] { Launch(*info, axes, args); });
    });
  }

  ffi::Bytes SaveToBytes() const final { return ffi::Bytes(WriteModule(module_)); }

  ffi::String InspectSource(const ffi::String& format) const final { return ffi::String(module_.data); }

  ffi::Array<ffi::String> GetWriteFormats() const final { return {ffi::String(module_.format)}; }

  void WriteToFile(const ffi::String& file_name, const ffi::String&) const final {
    std::ofstream out(std::string(file_name), std::ios::binary);
    out << module_.data;
    if (!out) TVM_FFI_THROW(RuntimeError) << "adreno OpenCL plugin: cannot write " << file_name;
  }

 private:
  ModulePrograms& Programs(int device_id) {
    std::lock_guard<std::mutex> guard(mutex_);
    if (device_id < 0) throw std::out_of_range("negative OpenCL device id");
    if (programs_.size() <= static_cast<size_t>(device_id)) programs_.resize(device_id + 1);
    if (!programs_[device_id]) {
      programs_[device_id] = std::make_unique<ModulePrograms>(OpenCLDevices::Global().at(device_id), module_);
    }
    return *programs_[device_id];
  }

  void Launch(const KernelInfo& info, const std::vector<int>& axes, ffi::PackedArgs args) {
    const size_t count = info.arg_types.size();
    if (static_cast<size_t>(args.size()) != count + axes.size()) {
      throw std::invalid_argument("kernel " + info.name + " takes " + std::to_string(count) + " arguments and " +
                                  std::to_string(axes.size()) + " launch extents, got " + std::to_string(args.size()));
    }
    const int device_id = CurrentDeviceId();
    ModulePrograms& programs = Programs(device_id);
    size_t work[6] = {1, 1, 1, 1, 1, 1};
    int work_dim = 1;
    for (size_t j = 0; j < axes.size(); ++j) {
      int64_t extent = args[count + j].cast<int64_t>();
      if (extent <= 0) throw std::invalid_argument("kernel " + info.name + ": launch extent " + std::to_string(extent));
      work[axes[j]] = static_cast<size_t>(extent);
      work_dim = std::max(work_dim, axes[j] % 3 + 1);
    }
    size_t global[3], local[3];
    for (int d = 0; d < 3; ++d) {
      global[d] = work[d] * work[d + 3];
      local[d] = work[d + 3];
    }
    tvm::Device dev{kDLOpenCL, device_id};
    auto queue = static_cast<cl_command_queue>(tvm::runtime::DeviceAPI::Get(dev)->GetCurrentStream(dev));
    std::lock_guard<std::mutex> guard(programs.lock());
    cl_kernel kernel = programs.Kernel(info.name);
    for (size_t i = 0; i < count; ++i) SetArg(kernel, static_cast<cl_uint>(i), info.arg_types[i], args[i], info);
    KernelProfiler& profiler = KernelProfiler::Global();
    cl_event event = nullptr;
    CheckCl(clEnqueueNDRangeKernel(queue, kernel, work_dim, nullptr, global, local, 0, nullptr,
                                   profiler.recording() ? &event : nullptr),
            "clEnqueueNDRangeKernel", info.name);
    if (event != nullptr) profiler.Record(info.name, event);
  }

  static void SetArg(cl_kernel kernel, cl_uint index, const ArgType& type, ffi::AnyView value,
                     const KernelInfo& info) {
    cl_int status = CL_SUCCESS;
    if (type.is_handle()) {
      void* mem = value.cast<void*>();
      status = clSetKernelArg(kernel, index, sizeof(cl_mem), &mem);
    } else if (type.code == kDLFloat && type.bits == 32) {
      float v = static_cast<float>(value.cast<double>());
      status = clSetKernelArg(kernel, index, sizeof(v), &v);
    } else if (type.code == kDLFloat && type.bits == 64) {
      double v = value.cast<double>();
      status = clSetKernelArg(kernel, index, sizeof(v), &v);
    } else if ((type.code == kDLInt || type.code == kDLUInt) && (type.bits == 32 || type.bits == 64 ||
                                                                   type.bits == 16 || type.bits == 8)) {
      int64_t v = value.cast<int64_t>();  // little-endian: the low bytes are the narrower value
      status = clSetKernelArg(kernel, index, type.bits / 8, &v);
    } else {
      throw std::invalid_argument("kernel " + info.name + ": argument " + std::to_string(index) + " has dtype code " +
                                  std::to_string(type.code) + " bits " + std::to_string(type.bits));
    }
    CheckCl(status, "clSetKernelArg", info.name + " argument " + std::to_string(index));
  }

  SerializedModule module_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<ModulePrograms>> programs_;  // by device id
};

}  // namespace

TVM_FFI_STATIC_INIT_BLOCK() {
  namespace refl = tvm::ffi::reflection;
  refl::GlobalDef()
      .def("ffi.Module.load_from_bytes.opencl",
           [](const ffi::Bytes& bytes) {
             return AtTvmBoundary([&] {
               SerializedModule module = ParseModule(std::string(bytes.data(), bytes.size()));
               return ffi::Module(ffi::make_object<OpenCLModuleNode>(std::move(module)));
             });
           })
      .def("adreno.opencl.profile_kernels", [](bool on) { KernelProfiler::Global().SetRecording(on); })
      .def("adreno.opencl.take_kernel_times", []() {
        return AtTvmBoundary([] {
          ffi::Array<ffi::Array<ffi::Any>> out;
          for (const auto& [kernel, ns] : KernelProfiler::Global().Take()) {
            out.push_back(ffi::Array<ffi::Any>{ffi::String(kernel), ns});
          }
          return out;
        });
      });
}

}  // namespace adreno_native
