// Stand-in for TVM's <tvm/support/io.h>, which the apache-tvm wheel does not ship although its public
// <tvm/runtime/tensor.h> includes it. tensor.h only names `support::Stream` in inline (de)serializers the plugin
// never calls, so this declares just enough for them to compile: a byte stream with typed helpers.
#ifndef ADRENO_NATIVE_SHIM_TVM_SUPPORT_IO_H_
#define ADRENO_NATIVE_SHIM_TVM_SUPPORT_IO_H_

#include <cstddef>

namespace tvm {
namespace support {

class Stream {
 public:
  virtual ~Stream() = default;
  virtual size_t Read(void* ptr, size_t size) = 0;
  virtual size_t Write(const void* ptr, size_t size) = 0;

  template <typename T>
  bool Read(T* value) {
    return Read(static_cast<void*>(value), sizeof(T)) == sizeof(T);
  }
  template <typename T>
  void Write(const T& value) {
    Write(static_cast<const void*>(&value), sizeof(T));
  }
  template <typename T>
  bool ReadArray(T* values, size_t count) {
    return Read(static_cast<void*>(values), sizeof(T) * count) == sizeof(T) * count;
  }
  template <typename T>
  void WriteArray(const T* values, size_t count) {
    Write(static_cast<const void*>(values), sizeof(T) * count);
  }
};

}  // namespace support
}  // namespace tvm

#endif  // ADRENO_NATIVE_SHIM_TVM_SUPPORT_IO_H_
