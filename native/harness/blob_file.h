// The harness's program-binary file: TVM's precompiled-program blob with a key and a checksum, so that an app's
// second start takes its programs from it and a blob for another device, other kernels, or damaged bytes is
// never handed to the driver.
//
// Layout (integers little-endian):
//   "ADRENO-CLBLOB\n"  14 bytes
//   u32 version        1
//   u64 key_len, key   "<platform>|<device>|<driver>\n<fnv1a64 of the OpenCL module's bytes, hex>"
//   u64 payload_len
//   u64 fnv1a64 of the payload
//   payload            the blob of opencl.GetPreCompiledPrograms (see native/plugin/serialized_module.h)
#ifndef ADRENO_HARNESS_BLOB_FILE_H_
#define ADRENO_HARNESS_BLOB_FILE_H_

#include <cstdint>
#include <optional>
#include <string>

namespace adreno_harness {

uint64_t Fnv1a64(const std::string& bytes);
std::string Hex64(uint64_t value);

// The payload when `path` holds a blob for `key` with intact bytes; otherwise nullopt and `why` says why
// ("absent", "for another device or kernels", "truncated", "checksum mismatch", ...).
std::optional<std::string> LoadBlobFile(const std::string& path, const std::string& key, std::string* why);
// Writes atomically; throws std::runtime_error when it cannot.
void SaveBlobFile(const std::string& path, const std::string& key, const std::string& payload);

}  // namespace adreno_harness

#endif  // ADRENO_HARNESS_BLOB_FILE_H_
