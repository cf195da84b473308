// Prints the SHA-256 of each file named on the command line (64 hex digits a line), streamed through Sha256 in
// pieces of 1, 63 and 65 bytes and the rest whole, so that every path of Update and both block functions (built
// twice: x86 SHA extensions where the CPU has them, and ADRENO_SHA256_PORTABLE) meet Python's hashlib in
// tests/native/test_fuzz.py.
#include <algorithm>
#include <cstdio>
#include <string>

#include "atomic_file.h"
#include "sha256.h"

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string bytes = adreno_harness::ReadFile(argv[i]);
    adreno_harness::Sha256 hash;
    size_t at = 0;
    for (size_t piece : {size_t{1}, size_t{63}, size_t{65}}) {
      const size_t take = std::min(piece, bytes.size() - at);
      hash.Update(bytes.data() + at, take);
      at += take;
    }
    hash.Update(bytes.data() + at, bytes.size() - at);
    const std::string digest = hash.Digest();
    for (unsigned char c : digest) std::printf("%02x", c);
    std::printf("\n");
  }
  return 0;
}
