// The OpenCL devices this process can use: found once, each with its own context and in-order queue.
//
// Device ids are positions in the list of every device of every platform, in the ICD loader's platform order
// and each platform's device order; `adreno.opencl.device_names` lets Python match an id to the device it
// selected with pyopencl (whose loader may list platforms differently).
#ifndef ADRENO_NATIVE_OPENCL_DEVICES_H_
#define ADRENO_NATIVE_OPENCL_DEVICES_H_

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cl_handle.h"

namespace adreno_native {

struct ClDevice {
  cl_platform_id platform = nullptr;
  cl_device_id id = nullptr;
  ClContext context;
  ClQueue queue;  // the default stream: in order, with profiling for event timing
  std::string name, platform_name, platform_version, driver_version, opencl_c_version;
  bool image_support = false;
  size_t image2d_max_width = 0, image2d_max_height = 0, image_max_array_size = 0;

  // "platform|device|driver": how Python matches this device to a pyopencl one.
  std::string Identity() const { return platform_name + "|" + name + "|" + driver_version; }
};

class OpenCLDevices {
 public:
  static OpenCLDevices& Global();

  size_t size();
  // The device of `id`; throws std::out_of_range naming the devices there are when there is none.
  ClDevice& at(int id);
  std::vector<std::string> Identities();

 private:
  void Discover();  // under mutex_, once
  std::mutex mutex_;
  bool discovered_ = false;
  std::vector<std::unique_ptr<ClDevice>> devices_;
};

// The device TVM last chose on this thread (DeviceAPI::SetDevice; TVM's host code sets it before each launch).
int& CurrentDeviceId();

// A fixed-size info value of a device (a number, a bool, a size).
template <typename T>
T DeviceInfoValue(cl_device_id device, cl_device_info what) {
  T value{};
  CL_CALL(clGetDeviceInfo, device, what, sizeof(T), &value, nullptr);
  return value;
}

// A string info value of a device or platform, trimmed of the trailing NULs and spaces drivers leave.
std::string DeviceInfoString(cl_device_id device, cl_device_info what);
std::string PlatformInfoString(cl_platform_id platform, cl_platform_info what);

}  // namespace adreno_native

#endif  // ADRENO_NATIVE_OPENCL_DEVICES_H_
