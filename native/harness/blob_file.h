// The harness's program-binary file: TVM's precompiled-program blobs with a key and digests, so that an app's
// second start takes its programs from it and a blob for another device, other kernels, or damaged bytes is
// never handed to the driver. A driver's binary loader trusts its input (PoCL's crashed on payloads whose old FNV-1a
// checksum had been recomputed, issue 46), so every payload is proved whole by SHA-256 before any of it is parsed.
// The digests prove the file whole, not who wrote it: one who can write the app's storage can write any binary.
//
// One file holds the programs of every shape set of an artifact that has run (adreno/artifact/shape_sets.py): one
// section per set's OpenCL module, keyed by that module's bytes, so that a start of any set that ran before builds
// nothing from source, and rewriting the file after one set's first run keeps the other sets' sections.
//
// Layout (integers little-endian):
//   "ADRENO-CLBLOB\n"  14 bytes
//   u32 version        3 (2 held one module's blob and no sections; 1 had an FNV-1a checksum: both rejected, and
//                      rewritten)
//   u64 key_len, key   "<platform>|<device>|<driver>\n<the artifact's kernels: SHA-256 hex over every set's host
//                      library SHA-256, as the manifest lists them, in set order>"
//   u64 sections       at least 1; then each section:
//     u64 key_len, key   SHA-256 hex of the set's OpenCL module's bytes (sections in increasing key order)
//     u64 payload_len
//     32 bytes           SHA-256 of the payload
//     payload            the blob of opencl.GetPreCompiledPrograms (see native/plugin/serialized_module.h)
#ifndef ADRENO_HARNESS_BLOB_FILE_H_
#define ADRENO_HARNESS_BLOB_FILE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace adreno_harness {

// Section key (a module's SHA-256 hex) -> its payload.
using BlobSections = std::map<std::string, std::string>;

// The sections when `path` holds a file for `key` whose every section is intact; otherwise nullopt and `why` says
// why ("absent", "for another device or kernels", "truncated", "SHA-256 mismatch", ...). Nothing of a damaged file
// is returned, not even its intact sections.
std::optional<BlobSections> LoadBlobFile(const std::string& path, const std::string& key, std::string* why);
// Writes atomically; throws std::runtime_error when it cannot (or when `sections` is empty).
void SaveBlobFile(const std::string& path, const std::string& key, const BlobSections& sections);

}  // namespace adreno_harness

#endif  // ADRENO_HARNESS_BLOB_FILE_H_
