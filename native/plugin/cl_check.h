// Checking OpenCL calls: every call's status is turned into an exception that names the call and the error.
#ifndef ADRENO_NATIVE_CL_CHECK_H_
#define ADRENO_NATIVE_CL_CHECK_H_

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <stdexcept>
#include <string>

namespace adreno_native {

// An OpenCL call failed. `code` is the OpenCL status; what() reads "clCreateBuffer: CL_OUT_OF_RESOURCES (-5)".
class ClError : public std::runtime_error {
 public:
  ClError(const std::string& call, cl_int code, const std::string& detail = "");
  cl_int code;
};

// The symbolic name of an OpenCL status ("CL_INVALID_VALUE"), or "unknown OpenCL error".
const char* ClErrorName(cl_int code);

// Throws ClError unless `code` is CL_SUCCESS.
inline void CheckCl(cl_int code, const char* call, const std::string& detail = "") {
  if (code != CL_SUCCESS) throw ClError(call, code, detail);
}

}  // namespace adreno_native

// CL_CALL(clFinish(queue)): runs the call and reports it by name when it fails.
#define CL_CALL(name, ...) ::adreno_native::CheckCl(name(__VA_ARGS__), #name)

#endif  // ADRENO_NATIVE_CL_CHECK_H_
