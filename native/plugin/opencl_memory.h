// OpenCL memory objects for TVM tensors: buffers for the global scope, RGBA image2d_arrays for texture scopes.
//
// A TVM tensor on OpenCL holds the cl_mem as its data pointer. Images are told from buffers by asking the
// driver (CL_MEM_TYPE), so a tensor never needs a side table to be copied correctly.
#ifndef ADRENO_NATIVE_OPENCL_MEMORY_H_
#define ADRENO_NATIVE_OPENCL_MEMORY_H_

#include <cstddef>

#include "cl_handle.h"
#include "image_geometry.h"
#include "opencl_devices.h"

namespace adreno_native {

enum class PixelType { kFloat32, kFloat16 };

// The pixel storage of an image for a tensor element type (code/bits of a DLDataType): float32 -> CL_FLOAT,
// float16 -> CL_HALF_FLOAT; anything else throws std::invalid_argument (images here hold floats only).
PixelType PixelTypeOf(int dtype_code, int dtype_bits);
size_t PixelTypeBytes(PixelType type);

ClMem CreateBuffer(ClDevice& device, size_t nbytes);
// An RGBA image2d_array of `dims`; refuses dims beyond the device's image limits with a message naming both.
ClMem CreateImage(ClDevice& device, const ImageDims& dims, PixelType type);

bool IsImage(cl_mem mem);
ImageDims ImageDimsOf(cl_mem mem);
size_t MemSize(cl_mem mem);

// Copies between host memory, buffers and images. Host copies block (the host memory may go away when the call
// returns); device-to-device copies are queued on `queue`. Image copies move whole images: the pixel array
// (layers, height, width, 4) is the tensor's row-major element order in every scope.
void WriteFromHost(cl_command_queue queue, cl_mem to, size_t to_offset, const void* from, size_t nbytes);
void ReadToHost(cl_command_queue queue, cl_mem from, size_t from_offset, void* to, size_t nbytes);
void CopyOnDevice(cl_command_queue queue, cl_mem from, size_t from_offset, cl_mem to, size_t to_offset,
                  size_t nbytes);

}  // namespace adreno_native

#endif  // ADRENO_NATIVE_OPENCL_MEMORY_H_
