// TVM's DeviceAPI and memory allocator for OpenCL: buffers for the global scope, images for texture scopes.
//
// Registered as `device_api.opencl` (what TVM's runtime asks for an OpenCL tensor, copy or sync) and
// `DeviceAllocator.opencl` (what the Relax VM's memory manager asks for its storage and tensor views), plus
// `adreno.opencl.empty_image(shape, dtype, device_id, scope, pixel_bits)` and `adreno.opencl.write_pixels(tensor,
// bytes)`: a tensor in an image of another pixel type than its dtype (fp16 artifacts), and its upload.
#include <tvm/ffi/reflection/registry.h>
#include <tvm/runtime/device_api.h>
#include <tvm/runtime/memory/memory_manager.h>

#include <map>
#include <mutex>
#include <sstream>
#include <tuple>
#include <vector>

#include "opencl_memory.h"
#include "tvm_boundary.h"

namespace adreno_native {

using tvm::Device;
using tvm::runtime::DeviceAPI;
using tvm::runtime::DeviceAttrKind;
namespace memory = tvm::runtime::memory;
namespace ffi = tvm::ffi;

namespace {

thread_local std::map<int, cl_command_queue> current_stream;  // device id -> the stream SetStream chose

cl_command_queue QueueOf(ClDevice& device, int device_id, TVMStreamHandle stream) {
  if (stream != nullptr) return static_cast<cl_command_queue>(stream);
  auto chosen = current_stream.find(device_id);
  return chosen != current_stream.end() && chosen->second ? chosen->second : device.queue.get();
}

std::string ScopeText(const ffi::Optional<ffi::String>& scope) {
  return scope.has_value() ? std::string(scope.value()) : std::string();
}

size_t TensorBytes(int ndim, const int64_t* shape, DLDataType dtype) {
  size_t count = 1;
  for (int i = 0; i < ndim; ++i) count *= static_cast<size_t>(shape[i]);
  return (count * dtype.bits * dtype.lanes + 7) / 8;
}

cl_mem AllocTensorMemory(int device_id, int ndim, const int64_t* shape, DLDataType dtype, const std::string& scope) {
  ClDevice& device = OpenCLDevices::Global().at(device_id);
  auto texture = ParseScope(scope);
  if (!texture) return CreateBuffer(device, TensorBytes(ndim, shape, dtype)).release();
  return CreateImage(device, TextureDims(ndim, shape, *texture), PixelTypeOf(dtype.code, dtype.bits)).release();
}

class OpenCLDeviceAPI final : public DeviceAPI {
 public:
  static OpenCLDeviceAPI* Global() {
    static auto* api = new OpenCLDeviceAPI();  // TVM keeps the pointer for the life of the process
    return api;
  }

  void SetDevice(Device dev) final { CurrentDeviceId() = dev.device_id; }

  void GetAttr(Device dev, DeviceAttrKind kind, ffi::Any* rv) final {
    AtTvmBoundary([&] {
      OpenCLDevices& devices = OpenCLDevices::Global();
      if (kind == tvm::runtime::kExist) {
        *rv = static_cast<int64_t>(dev.device_id >= 0 && static_cast<size_t>(dev.device_id) < devices.size());
        return;
      }
      ClDevice& device = devices.at(dev.device_id);
      switch (kind) {
        case tvm::runtime::kMaxThreadsPerBlock:
          *rv = static_cast<int64_t>(DeviceInfoValue<size_t>(device.id, CL_DEVICE_MAX_WORK_GROUP_SIZE));
          break;
        case tvm::runtime::kWarpSize:
          *rv = static_cast<int64_t>(1);  // OpenCL exposes no warp; TVM's OpenCL schedules assume 1
          break;
        case tvm::runtime::kMaxSharedMemoryPerBlock:
          *rv = static_cast<int64_t>(DeviceInfoValue<cl_ulong>(device.id, CL_DEVICE_LOCAL_MEM_SIZE));
          break;
        case tvm::runtime::kComputeVersion:
        case tvm::runtime::kApiVersion:
          *rv = ffi::String(DeviceInfoString(device.id, CL_DEVICE_VERSION));
          break;
        case tvm::runtime::kDeviceName:
          *rv = ffi::String(device.name);
          break;
        case tvm::runtime::kMaxClockRate:
          *rv = static_cast<int64_t>(DeviceInfoValue<cl_uint>(device.id, CL_DEVICE_MAX_CLOCK_FREQUENCY));
          break;
        case tvm::runtime::kMultiProcessorCount:
          *rv = static_cast<int64_t>(DeviceInfoValue<cl_uint>(device.id, CL_DEVICE_MAX_COMPUTE_UNITS));
          break;
        case tvm::runtime::kMaxThreadDimensions: {
          size_t dims[3] = {0, 0, 0};
          CL_CALL(clGetDeviceInfo, device.id, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof(dims), dims, nullptr);
          std::ostringstream text;
          text << "[" << dims[0] << ", " << dims[1] << ", " << dims[2] << "]";
          *rv = ffi::String(text.str());
          break;
        }
        case tvm::runtime::kDriverVersion:
          *rv = ffi::String(device.driver_version);
          break;
        case tvm::runtime::kTotalGlobalMemory:
        case tvm::runtime::kAvailableGlobalMemory:
          *rv = static_cast<int64_t>(DeviceInfoValue<cl_ulong>(device.id, CL_DEVICE_GLOBAL_MEM_SIZE));
          break;
        case tvm::runtime::kImagePitchAlignment:
        {
          // CL_DEVICE_IMAGE_PITCH_ALIGNMENT (OpenCL 2.0, 0x104A): 0 where the device does not report it
          cl_uint alignment = 0;
          if (clGetDeviceInfo(device.id, 0x104A, sizeof(alignment), &alignment, nullptr) != CL_SUCCESS) alignment = 0;
          *rv = static_cast<int64_t>(alignment);
          break;
        }
        default:
          break;  // unknown to OpenCL (registers, GCN arch, L2 size): left empty, as TVM expects
      }
    });
  }

  size_t GetDataSize(const DLTensor& arr, ffi::Optional<ffi::String> mem_scope) final {
    return AtTvmBoundary([&]() -> size_t {
      auto texture = ParseScope(ScopeText(mem_scope));
      if (!texture) return TensorBytes(arr.ndim, arr.shape, arr.dtype);
      ImageDims d = TextureDims(arr.ndim, arr.shape, *texture);
      return d.width * d.height * d.layers * 4 * PixelTypeBytes(PixelTypeOf(arr.dtype.code, arr.dtype.bits));
    });
  }

  void* AllocDataSpace(Device dev, size_t nbytes, size_t, DLDataType) final {
    return AtTvmBoundary([&] {
      return static_cast<void*>(CreateBuffer(OpenCLDevices::Global().at(dev.device_id), nbytes).release());
    });
  }

  void* AllocDataSpace(Device dev, int ndim, const int64_t* shape, DLDataType dtype,
                       ffi::Optional<ffi::String> mem_scope) final {
    return AtTvmBoundary([&] {
      return static_cast<void*>(AllocTensorMemory(dev.device_id, ndim, shape, dtype, ScopeText(mem_scope)));
    });
  }

  void FreeDataSpace(Device, void* ptr) final {
    if (ptr != nullptr) ClMem(static_cast<cl_mem>(ptr)).reset();
  }

  void CopyDataFromTo(DLTensor* from, DLTensor* to, TVMStreamHandle stream) final {
    AtTvmBoundary([&] {
      size_t nbytes = TensorBytes(from->ndim, from->shape, from->dtype);
      if (nbytes != TensorBytes(to->ndim, to->shape, to->dtype)) {
        throw std::invalid_argument("copy between tensors of " + std::to_string(nbytes) + " and " +
                                    std::to_string(TensorBytes(to->ndim, to->shape, to->dtype)) + " bytes");
      }
      bool from_cl = from->device.device_type == kDLOpenCL, to_cl = to->device.device_type == kDLOpenCL;
      const bool from_host = from->device.device_type == kDLCPU, to_host = to->device.device_type == kDLCPU;
      if (from_cl && to_cl) {
        if (from->device.device_id != to->device.device_id) {
          throw std::invalid_argument("copy between two OpenCL devices (each has its own context)");
        }
        ClDevice& device = OpenCLDevices::Global().at(from->device.device_id);
        CopyOnDevice(QueueOf(device, from->device.device_id, stream), static_cast<cl_mem>(from->data),
                     from->byte_offset, static_cast<cl_mem>(to->data), to->byte_offset, nbytes);
      } else if (from_cl && to_host) {
        ClDevice& device = OpenCLDevices::Global().at(from->device.device_id);
        ReadToHost(QueueOf(device, from->device.device_id, stream), static_cast<cl_mem>(from->data),
                   from->byte_offset, static_cast<char*>(to->data) + to->byte_offset, nbytes);
      } else if (from_host && to_cl) {
        ClDevice& device = OpenCLDevices::Global().at(to->device.device_id);
        WriteFromHost(QueueOf(device, to->device.device_id, stream), static_cast<cl_mem>(to->data), to->byte_offset,
                      static_cast<const char*>(from->data) + from->byte_offset, nbytes);
      } else {
        throw std::invalid_argument("the OpenCL device API copies between OpenCL and the CPU only");
      }
    });
  }

  TVMStreamHandle CreateStream(Device dev) final {
    return AtTvmBoundary([&] {
      ClDevice& device = OpenCLDevices::Global().at(dev.device_id);
      cl_int status = CL_SUCCESS;
      cl_command_queue queue =
          clCreateCommandQueue(device.context.get(), device.id, CL_QUEUE_PROFILING_ENABLE, &status);
      CheckCl(status, "clCreateCommandQueue", device.name);
      return static_cast<TVMStreamHandle>(queue);
    });
  }

  void FreeStream(Device dev, TVMStreamHandle stream) final {
    if (stream == nullptr) return;
    if (current_stream[dev.device_id] == stream) current_stream.erase(dev.device_id);
    ClQueue(static_cast<cl_command_queue>(stream)).reset();
  }

  void StreamSync(Device dev, TVMStreamHandle stream) final {
    AtTvmBoundary([&] {
      ClDevice& device = OpenCLDevices::Global().at(dev.device_id);
      CL_CALL(clFinish, QueueOf(device, dev.device_id, stream));
    });
  }

  void SetStream(Device dev, TVMStreamHandle stream) final {
    current_stream[dev.device_id] = static_cast<cl_command_queue>(stream);
  }

  TVMStreamHandle GetCurrentStream(Device dev) final {
    return AtTvmBoundary([&] {
      return static_cast<TVMStreamHandle>(QueueOf(OpenCLDevices::Global().at(dev.device_id), dev.device_id, nullptr));
    });
  }

 protected:
  void CopyDataFromTo(const void*, size_t, void*, size_t, size_t, Device, Device, DLDataType,
                      TVMStreamHandle) final {
    TVM_FFI_THROW(InternalError) << "adreno OpenCL plugin: pointer copies are not used; copies go through tensors";
  }

};

// The Relax VM's allocator: keeps freed buffers and images for reuse by the next allocation of the same size
// (a VM frees and allocates the same storage on every call), and lets a texture storage be viewed as the tensor
// it was allocated for.
class OpenCLAllocator final : public memory::Allocator {
 public:
  explicit OpenCLAllocator(memory::AllocatorType type) : memory::Allocator(type) {}
  ~OpenCLAllocator() override { Clear(); }

  memory::Buffer Alloc(Device dev, size_t nbytes, size_t, DLDataType) final {
    return AtTvmBoundary([&] { return Take(dev, Key{dev.device_id, nbytes, {}, PixelType::kFloat32, false}); });
  }

  memory::Buffer Alloc(Device dev, ffi::Shape shape, DLDataType dtype, const std::string& mem_scope) final {
    return AtTvmBoundary([&] {
      auto texture = ParseScope(mem_scope);
      if (!texture) return Take(dev, Key{dev.device_id, TensorBytes(shape.size(), shape.data(), dtype), {}, {}, false});
      ImageDims dims = TextureDims(static_cast<int>(shape.size()), shape.data(), *texture);
      PixelType pixel = PixelTypeOf(dtype.code, dtype.bits);
      return Take(dev, Key{dev.device_id, dims.width * dims.height * dims.layers * 4 * PixelTypeBytes(pixel), dims,
                           pixel, true});
    });
  }

  void* CreateView(const memory::Buffer& buffer, ffi::Shape shape, DLDataType dtype,
                   const std::string& mem_scope) final {
    return AtTvmBoundary([&] {
      auto texture = ParseScope(mem_scope);
      cl_mem mem = static_cast<cl_mem>(buffer.data);
      if (!texture) {
        if (IsImage(mem)) throw std::invalid_argument("a buffer view of an image storage");
        return buffer.data;
      }
      ImageDims wanted = TextureDims(static_cast<int>(shape.size()), shape.data(), *texture);
      if (!IsImage(mem) || !(ImageDimsOf(mem) == wanted)) {
        throw std::invalid_argument("a " + mem_scope + " view needs an image storage of its own geometry");
      }
      return buffer.data;  // the storage is the image: the view is the same handle, released with the storage
    });
  }

  void Free(const memory::Buffer& buffer) final {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = live_.find(buffer.data);
    if (found == live_.end()) return;
    used_ -= found->second.nbytes;
    pool_.emplace(found->second, static_cast<cl_mem>(buffer.data));
    live_.erase(found);
  }

  void Clear() final {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& entry : pool_) ClMem(entry.second).reset();
    pool_.clear();
  }

  size_t UsedMemory() const final { return used_; }

 protected:
  bool AllowMemoryScope(const std::string& mem_scope) const final {
    try {
      ParseScope(mem_scope);
      return true;
    } catch (const std::invalid_argument&) {
      return false;
    }
  }

 private:
  struct Key {
    int device_id;
    size_t nbytes;
    ImageDims dims;
    PixelType pixel;
    bool image;
    bool operator<(const Key& o) const {
      return std::tie(device_id, image, nbytes, dims.width, dims.height, dims.layers, pixel) <
             std::tie(o.device_id, o.image, o.nbytes, o.dims.width, o.dims.height, o.dims.layers, o.pixel);
    }
  };

  memory::Buffer Take(Device dev, const Key& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    cl_mem mem = nullptr;
    auto pooled = pool_.find(key);
    if (pooled != pool_.end()) {
      mem = pooled->second;
      pool_.erase(pooled);
    } else {
      ClDevice& device = OpenCLDevices::Global().at(dev.device_id);
      mem = key.image ? CreateImage(device, key.dims, key.pixel).release() : CreateBuffer(device, key.nbytes).release();
    }
    live_.emplace(mem, key);
    used_ += key.nbytes;
    memory::Buffer buffer;
    buffer.data = mem;
    // A view's dtype may be wider than the pixels (a float32 tensor in a half image): the VM checks a view's bytes
    // against this size, so an image reports what it holds in float32 elements.
    buffer.size = key.image ? key.dims.width * key.dims.height * key.dims.layers * 4 * sizeof(float) : key.nbytes;
    buffer.device = dev;
    buffer.alloc_type = type();
    return buffer;
  }

  std::mutex mutex_;
  std::multimap<Key, cl_mem> pool_;  // freed, ready for reuse; owned
  std::map<void*, Key> live_;        // handed out; owned
  size_t used_ = 0;
};

// A tensor whose data is an image of `pixels` storage: for an fp16 artifact's weights, float32 tensors (what its
// kernels take) held in half-float images (what the launch plan holds them in). Kernels read and write images
// with read_imagef/write_imagef, which convert, so only the allocation and the upload know the pixel type.
struct ImageAlloc {
  int device_id;
  ImageDims dims;
  PixelType pixels;
  void AllocData(DLTensor* tensor) {
    tensor->data = CreateImage(OpenCLDevices::Global().at(device_id), dims, pixels).release();
  }
  void FreeData(DLTensor* tensor) { ClMem(static_cast<cl_mem>(tensor->data)).reset(); }
};

ffi::Tensor EmptyImage(ffi::Shape shape, DLDataType dtype, int device_id, const std::string& scope, int pixel_bits) {
  auto texture = ParseScope(scope);
  if (!texture) throw std::invalid_argument("empty_image needs a texture scope, not '" + scope + "'");
  ImageAlloc alloc{device_id, TextureDims(static_cast<int>(shape.size()), shape.data(), *texture),
                   PixelTypeOf(kDLFloat, pixel_bits)};
  return ffi::Tensor::FromNDAlloc(alloc, shape, dtype, Device{kDLOpenCL, device_id});
}

}  // namespace

TVM_FFI_STATIC_INIT_BLOCK() {
  namespace refl = tvm::ffi::reflection;
  refl::GlobalDef()
      .def("device_api.opencl", []() { return static_cast<void*>(OpenCLDeviceAPI::Global()); })
      .def("DeviceAllocator.opencl",
           [](Device, int type) {
             return static_cast<void*>(new OpenCLAllocator(static_cast<memory::AllocatorType>(type)));
           })
      .def("adreno.opencl.empty_image",
           [](ffi::Shape shape, DLDataType dtype, int device_id, ffi::String scope, int pixel_bits) {
             return AtTvmBoundary([&] { return EmptyImage(shape, dtype, device_id, scope, pixel_bits); });
           })
      .def("adreno.opencl.write_pixels",
           [](DLTensor* image, ffi::Bytes pixels) {
             AtTvmBoundary([&] {
               ClDevice& device = OpenCLDevices::Global().at(image->device.device_id);
               WriteFromHost(device.queue.get(), static_cast<cl_mem>(image->data), 0, pixels.data(), pixels.size());
             });
           })
      .def("adreno.opencl.device_names", []() {
        return AtTvmBoundary([] {
          ffi::Array<ffi::String> names;
          for (const std::string& name : OpenCLDevices::Global().Identities()) names.push_back(name);
          return names;
        });
      });
}

}  // namespace adreno_native
