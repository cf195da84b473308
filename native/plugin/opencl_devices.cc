#include "opencl_devices.h"

#include <stdexcept>

namespace adreno_native {

namespace {

std::string Trim(std::string value) {
  while (!value.empty() && (value.back() == '\0' || value.back() == ' ')) value.pop_back();
  size_t start = value.find_first_not_of(' ');
  return start == std::string::npos ? "" : value.substr(start);
}

// The string a clGet*Info `query` (named `name` in errors) returns for `what` of `handle`: its size, then its bytes.
template <typename Query, typename Handle, typename Info>
std::string InfoString(Query query, const char* name, Handle handle, Info what) {
  size_t size = 0;
  CheckCl(query(handle, what, 0, nullptr, &size), name);
  std::string value(size, '\0');
  CheckCl(query(handle, what, size, value.data(), nullptr), name);
  return Trim(value);
}

}  // namespace

std::string DeviceInfoString(cl_device_id device, cl_device_info what) {
  return InfoString(clGetDeviceInfo, "clGetDeviceInfo", device, what);
}

std::string PlatformInfoString(cl_platform_id platform, cl_platform_info what) {
  return InfoString(clGetPlatformInfo, "clGetPlatformInfo", platform, what);
}

int& CurrentDeviceId() {
  thread_local int id = 0;
  return id;
}

OpenCLDevices& OpenCLDevices::Global() {
  static auto* devices = new OpenCLDevices();  // never destroyed: drivers may be unloaded first at exit
  return *devices;
}

void OpenCLDevices::Discover() {
  if (discovered_) return;
  discovered_ = true;
  cl_uint platform_count = 0;
  // No ICD at all reports CL_PLATFORM_NOT_FOUND_KHR: that is zero devices, not an error.
  if (clGetPlatformIDs(0, nullptr, &platform_count) != CL_SUCCESS || platform_count == 0) return;
  std::vector<cl_platform_id> platforms(platform_count);
  CL_CALL(clGetPlatformIDs, platform_count, platforms.data(), nullptr);
  for (cl_platform_id platform : platforms) {
    cl_uint device_count = 0;
    if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &device_count) != CL_SUCCESS) continue;
    std::vector<cl_device_id> ids(device_count);
    CL_CALL(clGetDeviceIDs, platform, CL_DEVICE_TYPE_ALL, device_count, ids.data(), nullptr);
    for (cl_device_id id : ids) {
      auto device = std::make_unique<ClDevice>();
      device->platform = platform;
      device->id = id;
      device->name = DeviceInfoString(id, CL_DEVICE_NAME);
      device->driver_version = DeviceInfoString(id, CL_DRIVER_VERSION);
      device->opencl_c_version = DeviceInfoString(id, CL_DEVICE_OPENCL_C_VERSION);
      device->platform_name = PlatformInfoString(platform, CL_PLATFORM_NAME);
      device->platform_version = PlatformInfoString(platform, CL_PLATFORM_VERSION);
      device->image_support = DeviceInfoValue<cl_bool>(id, CL_DEVICE_IMAGE_SUPPORT) == CL_TRUE;
      if (device->image_support) {
        device->image2d_max_width = DeviceInfoValue<size_t>(id, CL_DEVICE_IMAGE2D_MAX_WIDTH);
        device->image2d_max_height = DeviceInfoValue<size_t>(id, CL_DEVICE_IMAGE2D_MAX_HEIGHT);
        device->image_max_array_size = DeviceInfoValue<size_t>(id, CL_DEVICE_IMAGE_MAX_ARRAY_SIZE);
      }
      cl_int status = CL_SUCCESS;
      device->context = ClContext(clCreateContext(nullptr, 1, &id, nullptr, nullptr, &status));
      CheckCl(status, "clCreateContext", device->name);
      device->queue = ClQueue(clCreateCommandQueue(device->context.get(), id, CL_QUEUE_PROFILING_ENABLE, &status));
      CheckCl(status, "clCreateCommandQueue", device->name);
      devices_.push_back(std::move(device));
    }
  }
}

size_t OpenCLDevices::size() {
  std::lock_guard<std::mutex> lock(mutex_);
  Discover();
  return devices_.size();
}

ClDevice& OpenCLDevices::at(int id) {
  std::lock_guard<std::mutex> lock(mutex_);
  Discover();
  if (id < 0 || static_cast<size_t>(id) >= devices_.size()) {
    std::string names;
    for (size_t i = 0; i < devices_.size(); ++i) names += (i ? "; " : "") + std::to_string(i) + ": " + devices_[i]->name;
    throw std::out_of_range("no OpenCL device " + std::to_string(id) + " (" +
                            (devices_.empty() ? std::string("no OpenCL platform is installed") : names) + ")");
  }
  return *devices_[id];
}

std::vector<std::string> OpenCLDevices::Identities() {
  std::vector<std::string> out;
  for (size_t i = 0, n = size(); i < n; ++i) out.push_back(at(static_cast<int>(i)).Identity());
  return out;
}

}  // namespace adreno_native
