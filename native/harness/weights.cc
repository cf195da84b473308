#include "weights.h"

#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "atomic_file.h"

namespace adreno_harness {

namespace {

uint32_t U32(const std::string& b, size_t at) {
  uint32_t v;
  std::memcpy(&v, b.data() + at, 4);
  return v;
}

uint16_t U16(const std::string& b, size_t at) {
  uint16_t v;
  std::memcpy(&v, b.data() + at, 2);
  return v;
}

}  // namespace

std::map<std::string, NpyArray> ReadNpz(const std::string& path) {
  const std::string bytes = ReadFile(path);
  auto fail = [&](const std::string& what) { return std::runtime_error(path + ": " + what); };
  // The end-of-central-directory record: 22 bytes plus a comment of at most 64 KiB, at the end of the file.
  constexpr uint32_t kEnd = 0x06054b50, kCentral = 0x02014b50, kLocal = 0x04034b50;
  size_t end = std::string::npos;
  if (bytes.size() >= 22) {
    const size_t lowest = bytes.size() > 22 + 65535 ? bytes.size() - 22 - 65535 : 0;
    for (size_t i = bytes.size() - 22;; --i) {
      if (U32(bytes, i) == kEnd) {
        end = i;
        break;
      }
      if (i == lowest) break;
    }
  }
  if (end == std::string::npos) throw fail("not a zip archive (.npz)");
  const uint16_t count = U16(bytes, end + 10);
  const uint32_t directory = U32(bytes, end + 16);
  std::map<std::string, NpyArray> arrays;
  size_t at = directory;
  for (uint16_t i = 0; i < count; ++i) {
    if (at + 46 > bytes.size() || U32(bytes, at) != kCentral) throw fail("damaged zip directory");
    const uint16_t method = U16(bytes, at + 10), name_len = U16(bytes, at + 28), extra_len = U16(bytes, at + 30),
                   comment_len = U16(bytes, at + 32);
    const uint32_t size = U32(bytes, at + 20), stored = U32(bytes, at + 24), local = U32(bytes, at + 42);
    if (at + 46 + name_len > bytes.size()) throw fail("damaged zip directory");
    const std::string name = bytes.substr(at + 46, name_len);
    if (method != 0 || size != stored) throw fail(name + " is compressed; write the weights with numpy.savez");
    if (size == 0xffffffffu || local == 0xffffffffu) throw fail(name + " needs ZIP64, which this reader does not take");
    if (local + 30 > bytes.size() || U32(bytes, local) != kLocal) throw fail(name + ": damaged local header");
    const size_t data = local + 30 + U16(bytes, local + 26) + U16(bytes, local + 28);
    if (data + size > bytes.size()) throw fail(name + " is truncated");
    if (name.size() < 5 || name.compare(name.size() - 4, 4, ".npy") != 0) throw fail(name + " is not a .npy member");
    arrays[name.substr(0, name.size() - 4)] = ParseNpy(bytes.substr(data, size), path + ":" + name);
    at += 46 + name_len + extra_len + comment_len;
  }
  return arrays;
}

}  // namespace adreno_harness
