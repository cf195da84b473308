// Reading and writing NumPy .npy files (format 1.0-3.0, C order, little-endian): the harness's input and output
// files, so an app's test data can come from Python and its outputs go back to it.
#ifndef ADRENO_HARNESS_NPY_H_
#define ADRENO_HARNESS_NPY_H_

#include <cstdint>
#include <string>
#include <vector>

namespace adreno_harness {

struct NpyArray {
  std::string dtype;  // "float32", "float16", "int64", "int32", "int8", "uint8", "bool"
  std::vector<int64_t> shape;
  std::string data;   // the elements, C order
};

// An array whose elements stay where they are (in a mapped file): what the weights are read as, with no copy.
struct NpyView {
  std::string dtype;
  std::vector<int64_t> shape;
  const char* data = nullptr;
  size_t size = 0;
};

// A shape as errors name it, "1x3x224x224" (`adreno run`'s words; "" for a scalar).
std::string DimsText(const std::vector<int64_t>& shape);

// Element size of a dtype name; throws std::invalid_argument for one the harness does not handle.
size_t DtypeBytes(const std::string& dtype);

// Throws std::runtime_error naming the file (`where`) and what is wrong with it.
NpyArray ReadNpy(const std::string& path);
NpyView ParseNpy(const char* bytes, size_t size, const std::string& where);
// Writes atomically (a temporary file renamed into place).
void WriteNpy(const std::string& path, const NpyArray& array);

}  // namespace adreno_harness

#endif  // ADRENO_HARNESS_NPY_H_
