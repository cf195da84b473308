#include "opencl_memory.h"

#include <array>
#include <string>

namespace adreno_native {

namespace {

template <typename T>
T MemInfo(cl_mem mem, cl_mem_info what) {
  T value{};
  CL_CALL(clGetMemObjectInfo, mem, what, sizeof(T), &value, nullptr);
  return value;
}

template <typename T>
T ImageInfo(cl_mem mem, cl_image_info what) {
  T value{};
  CL_CALL(clGetImageInfo, mem, what, sizeof(T), &value, nullptr);
  return value;
}

std::string Dims(const ImageDims& d) {
  return std::to_string(d.width) + "x" + std::to_string(d.height) + "x" + std::to_string(d.layers);
}

const size_t kOrigin[3] = {0, 0, 0};

}  // namespace

PixelType PixelTypeOf(int dtype_code, int dtype_bits) {
  if (dtype_code == 2 /* kDLFloat */ && dtype_bits == 32) return PixelType::kFloat32;
  if (dtype_code == 2 && dtype_bits == 16) return PixelType::kFloat16;
  throw std::invalid_argument("a texture tensor holds float32 or float16, not dtype code " +
                              std::to_string(dtype_code) + " with " + std::to_string(dtype_bits) + " bits");
}

size_t PixelTypeBytes(PixelType type) { return type == PixelType::kFloat32 ? 4 : 2; }

ClMem CreateBuffer(ClDevice& device, size_t nbytes) {
  cl_int status = CL_SUCCESS;
  // A zero-byte tensor still needs a valid handle to pass to kernels; OpenCL refuses empty buffers.
  cl_mem mem = clCreateBuffer(device.context.get(), CL_MEM_READ_WRITE, nbytes ? nbytes : 1, nullptr, &status);
  CheckCl(status, "clCreateBuffer", std::to_string(nbytes) + " bytes on " + device.name);
  return ClMem(mem);
}

ClMem CreateImage(ClDevice& device, const ImageDims& dims, PixelType type) {
  if (!device.image_support) throw std::runtime_error(device.name + " has no image support; use --memory buffer");
  if (dims.width > device.image2d_max_width || dims.height > device.image2d_max_height ||
      dims.layers > device.image_max_array_size) {
    throw std::runtime_error("image " + Dims(dims) + " (width x height x layers) is beyond " + device.name +
                             "'s limits " +
                             Dims({device.image2d_max_width, device.image2d_max_height, device.image_max_array_size}));
  }
  cl_image_format format{CL_RGBA, static_cast<cl_channel_type>(type == PixelType::kFloat32 ? CL_FLOAT : CL_HALF_FLOAT)};
  cl_image_desc desc{};
  desc.image_type = CL_MEM_OBJECT_IMAGE2D_ARRAY;
  desc.image_width = dims.width;
  desc.image_height = dims.height;
  desc.image_array_size = dims.layers;
  cl_int status = CL_SUCCESS;
  cl_mem mem = clCreateImage(device.context.get(), CL_MEM_READ_WRITE, &format, &desc, nullptr, &status);
  CheckCl(status, "clCreateImage", Dims(dims) + " RGBA image array on " + device.name);
  return ClMem(mem);
}

bool IsImage(cl_mem mem) { return MemInfo<cl_mem_object_type>(mem, CL_MEM_TYPE) != CL_MEM_OBJECT_BUFFER; }

ImageDims ImageDimsOf(cl_mem mem) {
  return {ImageInfo<size_t>(mem, CL_IMAGE_WIDTH), ImageInfo<size_t>(mem, CL_IMAGE_HEIGHT),
          ImageInfo<size_t>(mem, CL_IMAGE_ARRAY_SIZE)};
}

size_t MemSize(cl_mem mem) { return MemInfo<size_t>(mem, CL_MEM_SIZE); }

namespace {

// The region of a whole-image copy of `nbytes` from element offset `offset`, checked to cover the image exactly.
std::array<size_t, 3> WholeImage(cl_mem image, size_t offset, size_t nbytes, const char* what) {
  ImageDims d = ImageDimsOf(image);
  size_t pixel = ImageInfo<size_t>(image, CL_IMAGE_ELEMENT_SIZE);
  size_t bytes = d.width * d.height * d.layers * pixel;
  if (offset != 0 || nbytes != bytes) {
    throw std::invalid_argument(std::string(what) + ": an image copy moves the whole " + Dims(d) + " image (" +
                                std::to_string(bytes) + " bytes), not " + std::to_string(nbytes) +
                                " bytes at offset " + std::to_string(offset));
  }
  return {d.width, d.height, d.layers};
}

}  // namespace

void WriteFromHost(cl_command_queue queue, cl_mem to, size_t to_offset, const void* from, size_t nbytes) {
  if (IsImage(to)) {
    auto region = WholeImage(to, to_offset, nbytes, "copy to an image");
    CL_CALL(clEnqueueWriteImage, queue, to, CL_TRUE, kOrigin, region.data(), 0, 0, from, 0, nullptr, nullptr);
  } else if (nbytes) {
    CL_CALL(clEnqueueWriteBuffer, queue, to, CL_TRUE, to_offset, nbytes, from, 0, nullptr, nullptr);
  }
}

void ReadToHost(cl_command_queue queue, cl_mem from, size_t from_offset, void* to, size_t nbytes) {
  if (IsImage(from)) {
    auto region = WholeImage(from, from_offset, nbytes, "copy from an image");
    CL_CALL(clEnqueueReadImage, queue, from, CL_TRUE, kOrigin, region.data(), 0, 0, to, 0, nullptr, nullptr);
  } else if (nbytes) {
    CL_CALL(clEnqueueReadBuffer, queue, from, CL_TRUE, from_offset, nbytes, to, 0, nullptr, nullptr);
  }
}

void CopyOnDevice(cl_command_queue queue, cl_mem from, size_t from_offset, cl_mem to, size_t to_offset,
                  size_t nbytes) {
  bool from_image = IsImage(from), to_image = IsImage(to);
  std::array<size_t, 3> from_region{}, to_region{};
  if (from_image) from_region = WholeImage(from, from_offset, nbytes, "copy from an image");
  if (to_image) to_region = WholeImage(to, to_offset, nbytes, "copy to an image");
  if (from_image && to_image) {
    CL_CALL(clEnqueueCopyImage, queue, from, to, kOrigin, kOrigin, from_region.data(), 0, nullptr, nullptr);
  } else if (from_image) {
    CL_CALL(clEnqueueCopyImageToBuffer, queue, from, to, kOrigin, from_region.data(), to_offset, 0, nullptr, nullptr);
  } else if (to_image) {
    CL_CALL(clEnqueueCopyBufferToImage, queue, from, to, from_offset, kOrigin, to_region.data(), 0, nullptr, nullptr);
  } else if (nbytes) {
    CL_CALL(clEnqueueCopyBuffer, queue, from, to, from_offset, to_offset, nbytes, 0, nullptr, nullptr);
  }
}

}  // namespace adreno_native
