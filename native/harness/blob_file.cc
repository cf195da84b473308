#include "blob_file.h"

#include <sys/stat.h>

#include <cstring>
#include <stdexcept>

#include "atomic_file.h"

namespace adreno_harness {

namespace {

const char kMagic[] = "ADRENO-CLBLOB\n";
const size_t kMagicLen = sizeof(kMagic) - 1;
const uint32_t kVersion = 1;

template <typename T>
void Put(std::string* out, T value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(value));
}

template <typename T>
bool Get(const std::string& in, size_t* pos, T* value) {
  if (in.size() - *pos < sizeof(T)) return false;
  std::memcpy(value, in.data() + *pos, sizeof(T));
  *pos += sizeof(T);
  return true;
}

}  // namespace

uint64_t Fnv1a64(const std::string& bytes) {
  uint64_t hash = 1469598103934665603ULL;
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  return hash;
}

std::string Hex64(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(value));
  return text;
}

std::optional<std::string> LoadBlobFile(const std::string& path, const std::string& key, std::string* why) {
  struct stat info;
  if (stat(path.c_str(), &info) != 0) {
    *why = "absent";
    return std::nullopt;
  }
  std::string bytes;
  try {
    bytes = ReadFile(path);
  } catch (const std::runtime_error& err) {
    *why = err.what();
    return std::nullopt;
  }
  size_t pos = kMagicLen;
  uint32_t version = 0;
  uint64_t key_len = 0, payload_len = 0, checksum = 0;
  if (bytes.size() < kMagicLen || bytes.compare(0, kMagicLen, kMagic) != 0 || !Get(bytes, &pos, &version)) {
    *why = "not a program-binary file";
    return std::nullopt;
  }
  if (version != kVersion) {
    *why = "format version " + std::to_string(version) + ", this harness reads " + std::to_string(kVersion);
    return std::nullopt;
  }
  if (!Get(bytes, &pos, &key_len) || key_len > bytes.size() - pos) {
    *why = "truncated";
    return std::nullopt;
  }
  if (bytes.compare(pos, key_len, key) != 0 || key_len != key.size()) {
    *why = "for another device or kernels";
    return std::nullopt;
  }
  pos += key_len;
  if (!Get(bytes, &pos, &payload_len) || !Get(bytes, &pos, &checksum) || payload_len != bytes.size() - pos) {
    *why = "truncated";
    return std::nullopt;
  }
  std::string payload = bytes.substr(pos);
  if (Fnv1a64(payload) != checksum) {
    *why = "checksum mismatch";
    return std::nullopt;
  }
  return payload;
}

void SaveBlobFile(const std::string& path, const std::string& key, const std::string& payload) {
  std::string out(kMagic, kMagicLen);
  Put(&out, kVersion);
  Put<uint64_t>(&out, key.size());
  out += key;
  Put<uint64_t>(&out, payload.size());
  Put<uint64_t>(&out, Fnv1a64(payload));
  out += payload;
  WriteFileAtomically(path, out);
}

}  // namespace adreno_harness
