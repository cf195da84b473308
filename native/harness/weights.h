// The artifact's weight file, params.npz, read without Python or numpy: numpy.savez writes an uncompressed
// (stored) zip archive whose members are "<param>.npy" files. This reader takes exactly that: stored members,
// no ZIP64, each a .npy the harness's npy reader accepts; anything else is refused, naming the member.
// The file is mapped, not read: each weight is copied once, from the page cache to the device.
#ifndef ADRENO_HARNESS_WEIGHTS_H_
#define ADRENO_HARNESS_WEIGHTS_H_

#include <functional>
#include <map>
#include <string>

#include "npy.h"

namespace adreno_harness {

class WeightFile {
 public:
  // Throws std::runtime_error naming the file and what is wrong with it. `verify`, when given, sees the file's bytes
  // before anything of them is parsed, and throws to refuse them (the harness checks them against the manifest).
  explicit WeightFile(const std::string& path,
                      const std::function<void(const void* data, size_t size)>& verify = nullptr);
  ~WeightFile();
  WeightFile(const WeightFile&) = delete;
  WeightFile& operator=(const WeightFile&) = delete;

  // param name (the member name without ".npy") -> its elements, valid while this object lives.
  const std::map<std::string, NpyView>& arrays() const { return arrays_; }

 private:
  void Index(const std::string& path);  // fills arrays_ from the mapped archive
  void* map_ = nullptr;
  size_t size_ = 0;
  std::map<std::string, NpyView> arrays_;
};

}  // namespace adreno_harness

#endif  // ADRENO_HARNESS_WEIGHTS_H_
