// The artifact proved whole before the harness trusts it, as Artifact.load proves it (adreno/artifact/check.py):
// the manifest's fields that decide what runs match their run_sha256, and each file the harness reads (plan.json,
// lib.so, params.npz) has the size and SHA-256 the manifest lists. The manifest is the root of trust: this catches
// damage and one-file edits (a param's scope switched in plan.json, two host_params swapped, weight bytes changed);
// one who rewrites the manifest's hashes too can ship anything (docs/native.md).
#ifndef ADRENO_HARNESS_INTEGRITY_H_
#define ADRENO_HARNESS_INTEGRITY_H_

#include <cstddef>
#include <string>

#include "json_fields.h"

namespace adreno_harness {

// `value` written as Python's json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True) writes it;
// throws std::runtime_error naming `where` for a value that has no such form here (a float, a non-string key,
// bytes that are not UTF-8).
std::string CanonicalJson(const json::Value& value, const std::string& where);

// Throws std::runtime_error "manifest.json: ..." unless run_sha256 is the SHA-256 of the canonical JSON of the
// manifest's RUN_FIELDS, with each shape set's plan and RUN_FIELDS for an artifact of several
// (adreno.artifact.check.run_digest).
void VerifyRunDigest(const json::Object& manifest);

// Throws std::runtime_error "<rel>: ..." unless `size` bytes at `data` are the size and SHA-256 the manifest lists
// for the artifact's file `rel`.
void VerifyListedFile(const json::Object& manifest, const std::string& rel, const void* data, size_t size);

}  // namespace adreno_harness

#endif  // ADRENO_HARNESS_INTEGRITY_H_
