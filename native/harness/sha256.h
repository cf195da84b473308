// SHA-256 (FIPS 180-4): what proves a file whole before the harness trusts it. The artifact's manifest records each
// file's SHA-256 (adreno/artifact/format.py), and the program-binary file carries its payload's, so a changed byte is a
// refusal before any weight is uploaded or any binary reaches the driver.
#ifndef ADRENO_HARNESS_SHA256_H_
#define ADRENO_HARNESS_SHA256_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace adreno_harness {

class Sha256 {
 public:
  Sha256();
  void Update(const void* data, size_t size);
  // The 32 bytes of the digest; the object is spent afterwards.
  std::string Digest();

 private:
  void Blocks(const unsigned char* data, size_t count);  // the x86 SHA extensions' rounds where the CPU has them
  void Block(const unsigned char* block);
  uint32_t state_[8];
  unsigned char buffer_[64];
  size_t buffered_ = 0;
  uint64_t length_ = 0;  // bytes hashed so far
};

// The digest of `data` as 64 lowercase hex digits, the form the manifest records.
std::string Sha256Hex(const void* data, size_t size);

}  // namespace adreno_harness

#endif  // ADRENO_HARNESS_SHA256_H_
