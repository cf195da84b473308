// The harness's program-binary file: TVM's precompiled-program blob with a key and a digest, so that an app's
// second start takes its programs from it and a blob for another device, other kernels, or damaged bytes is
// never handed to the driver. A driver's binary loader trusts its input (PoCL's crashed on payloads whose old FNV-1a
// checksum had been recomputed, issue 46), so the payload is proved whole by SHA-256 before any of it is parsed. The
// digest proves the file whole, not who wrote it: one who can write the app's storage can write any binary.
//
// Layout (integers little-endian):
//   "ADRENO-CLBLOB\n"  14 bytes
//   u32 version        2 (1 had an FNV-1a checksum: rejected, and rewritten)
//   u64 key_len, key   "<platform>|<device>|<driver>\n<SHA-256 of the OpenCL module's bytes, hex>"
//   u64 payload_len
//   32 bytes           SHA-256 of the payload
//   payload            the blob of opencl.GetPreCompiledPrograms (see native/plugin/serialized_module.h)
#ifndef ADRENO_HARNESS_BLOB_FILE_H_
#define ADRENO_HARNESS_BLOB_FILE_H_

#include <cstdint>
#include <optional>
#include <string>

namespace adreno_harness {

// The payload when `path` holds a blob for `key` with intact bytes; otherwise nullopt and `why` says why
// ("absent", "for another device or kernels", "truncated", "SHA-256 mismatch", ...).
std::optional<std::string> LoadBlobFile(const std::string& path, const std::string& key, std::string* why);
// Writes atomically; throws std::runtime_error when it cannot.
void SaveBlobFile(const std::string& path, const std::string& key, const std::string& payload);

}  // namespace adreno_harness

#endif  // ADRENO_HARNESS_BLOB_FILE_H_
