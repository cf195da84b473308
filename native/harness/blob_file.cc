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
const uint32_t kVersion = 3;
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

// A u64 length and that many bytes at *pos; false when the bytes end first.
bool GetString(const std::string& in, size_t* pos, std::string* value) {
  uint64_t length = 0;
  if (!Get(in, pos, &length) || length > in.size() - *pos) return false;
  *value = in.substr(*pos, length);
  *pos += length;
  return true;
}

// The payload's SHA-256, its 32 bytes.
std::string Digest(const std::string& payload) {
  Sha256 hash;
  hash.Update(payload.data(), payload.size());
  return hash.Digest();
}

}  // namespace

std::optional<BlobSections> LoadBlobFile(const std::string& path, const std::string& key, std::string* why) {
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
  if (bytes.size() < kMagicLen || bytes.compare(0, kMagicLen, kMagic) != 0 || !Get(bytes, &pos, &version)) {
    *why = "not a program-binary file";
    return std::nullopt;
  }
  if (version != kVersion) {
    *why = "format version " + std::to_string(version) + ", this harness reads " + std::to_string(kVersion);
    return std::nullopt;
  }
  std::string file_key;
  if (!GetString(bytes, &pos, &file_key)) {
    *why = "truncated";
    return std::nullopt;
  }
  if (file_key != key) {
    *why = "for another device or kernels";
    return std::nullopt;
  }
  uint64_t count = 0;
  if (!Get(bytes, &pos, &count) || count == 0) {
    *why = "truncated";
    return std::nullopt;
  }
  BlobSections sections;
  for (uint64_t i = 0; i < count; ++i) {
    std::string section, payload;
    if (!GetString(bytes, &pos, &section) || bytes.size() - pos < 8 + kDigestLen) {
      *why = "truncated";
      return std::nullopt;
    }
    uint64_t payload_len = 0;
    Get(bytes, &pos, &payload_len);
    const std::string digest = bytes.substr(pos, kDigestLen);
    pos += kDigestLen;
    if (payload_len > bytes.size() - pos) {
      *why = "truncated";
      return std::nullopt;
    }
    payload = bytes.substr(pos, payload_len);
    pos += payload_len;
    if (Digest(payload) != digest) {
      *why = "SHA-256 mismatch";
      return std::nullopt;
    }
    if (!sections.emplace(section, std::move(payload)).second) {
      *why = "section " + section.substr(0, 16) + " twice";
      return std::nullopt;
    }
  }
  if (pos != bytes.size()) {
    *why = "bytes after its last section";
    return std::nullopt;
  }
  return sections;
}

void SaveBlobFile(const std::string& path, const std::string& key, const BlobSections& sections) {
  if (sections.empty()) throw std::runtime_error(path + ": no programs to write");
  std::string out(kMagic, kMagicLen);
  Put(&out, kVersion);
  Put<uint64_t>(&out, key.size());
  out += key;
  Put<uint64_t>(&out, sections.size());
  for (const auto& [section, payload] : sections) {
    Put<uint64_t>(&out, section.size());
    out += section;
    Put<uint64_t>(&out, payload.size());
    out += Digest(payload);
    out += payload;
  }
  WriteFileAtomically(path, out);
}

}  // namespace adreno_harness
