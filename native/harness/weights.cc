#include "weights.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "checked.h"


namespace adreno_harness {

namespace {

struct Bytes {
  const char* data;
  size_t size;
};

uint32_t U32(const Bytes& b, size_t at) {
  uint32_t v;
  std::memcpy(&v, b.data + at, 4);
  return v;
}

uint16_t U16(const Bytes& b, size_t at) {
  uint16_t v;
  std::memcpy(&v, b.data + at, 2);
  return v;
}

}  // namespace

WeightFile::WeightFile(const std::string& path, const std::function<void(const void* data, size_t size)>& verify) {
  int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);  // a FIFO: refused below, not waited on
  struct stat info;
  if (fd < 0 || fstat(fd, &info) != 0) {
    if (fd >= 0) close(fd);
    throw std::runtime_error(path + ": cannot open it (" + std::strerror(errno) + ")");
  }
  if (!S_ISREG(info.st_mode)) {
    close(fd);
    throw std::runtime_error(path + ": not a regular file");
  }
  size_ = static_cast<size_t>(info.st_size);
  if (size_ > 0) map_ = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw std::runtime_error(path + ": cannot map it (" + std::strerror(errno) + ")");
  }
  try {
    if (verify) verify(map_, size_);
    Index(path);
  } catch (...) {
    if (map_ != nullptr) munmap(map_, size_);  // the destructor does not run for a constructor that throws
    throw;
  }
}

void WeightFile::Index(const std::string& path) {
  const Bytes bytes{static_cast<const char*>(map_), size_};
  auto fail = [&](const std::string& what) { return std::runtime_error(path + ": " + what); };
  // The end-of-central-directory record: 22 bytes plus a comment of at most 64 KiB, at the end of the file.
  constexpr uint32_t kEnd = 0x06054b50, kCentral = 0x02014b50, kLocal = 0x04034b50;
  constexpr uint64_t kCentralBytes = 46, kLocalBytes = 30, kEndBytes = 22;
  size_t end = std::string::npos;
  if (bytes.size >= kEndBytes) {
    const size_t lowest = bytes.size > kEndBytes + 65535 ? bytes.size - kEndBytes - 65535 : 0;
    for (size_t i = bytes.size - kEndBytes;; --i) {
      if (U32(bytes, i) == kEnd) {
        end = i;
        break;
      }
      if (i == lowest) break;
    }
  }
  if (end == std::string::npos) throw fail("not a zip archive (.npz)");
  const uint16_t count = U16(bytes, end + 10);
  const uint64_t directory = U32(bytes, end + 16);
  if (count == 0xffffu || directory == 0xffffffffu) {
    throw fail("zip directory needs ZIP64, which this reader does not take");
  }
  // every field below is a 64-bit sum checked against the bytes before it is read (checked.h)
  uint64_t at = directory;
  for (uint16_t i = 0; i < count; ++i) {
    const std::string entry = "zip directory entry " + std::to_string(i);
    CheckedAdd(at, kCentralBytes, end, path, (entry + " header").c_str());
    if (U32(bytes, at) != kCentral) throw fail(entry + ": no directory signature (damaged zip directory)");
    const uint16_t method = U16(bytes, at + 10), name_len = U16(bytes, at + 28), extra_len = U16(bytes, at + 30),
                   comment_len = U16(bytes, at + 32);
    const uint64_t size = U32(bytes, at + 20), stored = U32(bytes, at + 24), local = U32(bytes, at + 42);
    CheckedAdd(at + kCentralBytes, name_len, end, path, (entry + " name").c_str());
    const std::string name(bytes.data + at + kCentralBytes, name_len);
    const std::string member = path + ":" + name;
    if (method != 0 || size != stored) throw fail(name + " is compressed; write the weights with numpy.savez");
    if (size == 0xffffffffu || local == 0xffffffffu) throw fail(name + " needs ZIP64, which this reader does not take");
    if (name.size() < 5 || name.compare(name.size() - 4, 4, ".npy") != 0) throw fail(name + " is not a .npy member");
    const std::string param = name.substr(0, name.size() - 4);
    if (arrays_.count(param)) throw fail(name + " is in the zip directory twice");
    CheckedAdd(local, kLocalBytes, directory, member, "local header offset");
    if (U32(bytes, local) != kLocal) throw fail(name + ": no local header signature at its offset (damaged zip)");
    const uint64_t local_name = U16(bytes, local + 26), local_extra = U16(bytes, local + 28);
    const uint64_t data = CheckedAdd(local + kLocalBytes, local_name + local_extra, directory, member,
                                     "local header name and extra field");
    if (local_name != name_len || std::memcmp(bytes.data + local + kLocalBytes, name.data(), name_len) != 0) {
      throw fail(name + ": its local header names another member (damaged zip)");
    }
    CheckedAdd(data, size, directory, member, "data");
    arrays_[param] = ParseNpy(bytes.data + data, size, member);
    at += kCentralBytes + name_len + extra_len + comment_len;
  }
}

WeightFile::~WeightFile() {
  if (map_ != nullptr) munmap(map_, size_);
}

}  // namespace adreno_harness
