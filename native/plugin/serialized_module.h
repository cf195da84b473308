// The bytes of an OpenCL module as TVM's compiler writes them into a host library, and the precompiled-program
// blob TVM's OpenCL runtime exchanges through opencl.Get/SetPreCompiledPrograms. Plain C++: no TVM, no OpenCL.
//
// Every integer is little-endian; a string is a u64 length and its bytes.
//   module   := string format ("cl": the data is OpenCL C source; "cl.zlib": the data is u64 source bytes
//                                  and the source's zlib stream, as adreno/compiler/library_blob.py writes a host
// library)
//               u64 kernel_count, kernel_count x (string key, kernel)
//               string data
//   kernel   := string name
//               u64 n, n x dtype (u8 code, u8 bits, u16 lanes)      one per kernel argument
//               u64 m, m x string launch_param_tag                  "blockIdx.x", "threadIdx.y", ...
//               u64 k, k x i32 arg_extra_tag                        0 for a plain argument
//   blob     := u64 count, count x (string kernel_name, string program_binary)
// tests/test_native_plugin.py writes modules with TVM's compiler and reads them back through the plugin.
#ifndef ADRENO_NATIVE_SERIALIZED_MODULE_H_
#define ADRENO_NATIVE_SERIALIZED_MODULE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace adreno_native {

struct ArgType {
  uint8_t code = 0, bits = 0;
  uint16_t lanes = 0;
  bool is_handle() const { return code == 3; }  // kDLOpaqueHandle: a buffer or image (cl_mem)
};

struct KernelInfo {
  std::string name;
  std::vector<ArgType> arg_types;
  std::vector<std::string> launch_param_tags;
  std::vector<int32_t> arg_extra_tags;
};

struct SerializedModule {
  std::string format;
  std::vector<std::pair<std::string, KernelInfo>> kernels;  // in the order the compiler wrote them
  std::string data;

  const KernelInfo* Find(const std::string& name) const;
};

using ProgramBlob = std::vector<std::pair<std::string, std::string>>;  // kernel name -> program binary

// Throw std::invalid_argument naming what is truncated or malformed, and where. A "cl.zlib" module comes back
// inflated, as "cl".
SerializedModule ParseModule(const std::string& bytes);
ProgramBlob ParseProgramBlob(const std::string& bytes);

std::string WriteModule(const SerializedModule& module);
std::string WriteProgramBlob(const ProgramBlob& blob);

}  // namespace adreno_native

#endif  // ADRENO_NATIVE_SERIALIZED_MODULE_H_
