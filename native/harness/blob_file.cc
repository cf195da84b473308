#include "blob_file.h"

#include <sys/stat.h>

#include <cstring>
#include <stdexcept>

#include "atomic_file.h"
#include "sha256.h"

namespace adreno_harness {

namespace {

const char kMagic[] = "ADRENO-CLBLOB\n";
const size_t kMagicLen = sizeof(kMagic) - 1;
const uint32_t kVersion = 2;
const size_t kDigestLen = 32;

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

// The payload's SHA-256, its 32 bytes.
std::string Digest(const std::string& payload) {
  Sha256 hash;
  hash.Update(payload.data(), payload.size());
  return hash.Digest();
}

}  // namespace

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
  uint64_t key_len = 0, payload_len = 0;
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
  if (key_len != key.size() || bytes.compare(pos, key_len, key) != 0) {
    *why = "for another device or kernels";
    return std::nullopt;
  }
  pos += key_len;
  if (!Get(bytes, &pos, &payload_len) || bytes.size() - pos < kDigestLen ||
      payload_len != bytes.size() - pos - kDigestLen) {
    *why = "truncated";
    return std::nullopt;
  }
  const std::string digest = bytes.substr(pos, kDigestLen);
  std::string payload = bytes.substr(pos + kDigestLen);
  if (Digest(payload) != digest) {
    *why = "SHA-256 mismatch";
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
  out += Digest(payload);
  out += payload;
  WriteFileAtomically(path, out);
}

}  // namespace adreno_harness
