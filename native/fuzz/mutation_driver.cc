// A seeded mutation loop for readers_fuzz.cc where clang's libFuzzer is not installed (g++ builds): the same
// command line as a libFuzzer binary for what the tests use (`-runs=N -seed=S DIR...`), each run one seed file from
// the directories, mutated 1 to 8 times by byte flips, interesting integers written over 1, 2, 4 or 8 bytes (the
// zip and blob length fields), inserted and removed bytes and digits, and copied chunks. No coverage guidance: the
// seeds carry the structure. A finding aborts with the sanitizer's report, as libFuzzer's would.
#include <dirent.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "atomic_file.h"

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv);
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

void Mutate(std::string* bytes, std::mt19937_64* rng) {
  static const uint64_t kInteresting[] = {0, 1, 0x7f, 0x80, 0xff, 0x7fff, 0xffff, 0x7fffffff, 0x80000000,
                                          0xfffffff0, 0xffffffff, 0x7fffffffffffffffULL, 0xffffffffffffffffULL};
  auto pick = [&](uint64_t n) { return n == 0 ? 0 : (*rng)() % n; };
  switch (pick(6)) {
    case 0:
      if (!bytes->empty()) (*bytes)[pick(bytes->size())] ^= static_cast<char>(1 << pick(8));
      break;
    case 1: {
      const size_t width = size_t{1} << pick(4);
      if (bytes->size() < width) break;
      const uint64_t value = kInteresting[pick(sizeof(kInteresting) / sizeof(kInteresting[0]))];
      std::memcpy(bytes->data() + pick(bytes->size() - width + 1), &value, width);
      break;
    }
    case 2:
      bytes->insert(pick(bytes->size() + 1), 1 + pick(4), static_cast<char>(pick(256)));
      break;
    case 3:
      if (!bytes->empty()) bytes->erase(pick(bytes->size()), 1 + pick(16));
      break;
    case 4: {  // a digit or a JSON/Python token where a number or a bracket was: shapes, sizes, nesting
      static const char* kTokens[] = {"-1", "0", "99999999999999999999999", "4611686018427387904", "[", "{", "]",
                                      "\"", ",", "false", "null", "1e400", "(", ")", "$"};
      if (bytes->empty()) break;
      const size_t at = pick(bytes->size());
      bytes->replace(at, pick(3), kTokens[pick(sizeof(kTokens) / sizeof(kTokens[0]))]);
      break;
    }
    default: {
      if (bytes->size() < 2) break;
      const size_t from = pick(bytes->size()), length = 1 + pick(std::min<size_t>(64, bytes->size() - from));
      bytes->insert(pick(bytes->size()), bytes->substr(from, length));
      break;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  LLVMFuzzerInitialize(&argc, &argv);
  uint64_t runs = 1000, seed = 1;
  std::vector<std::string> seeds;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("-runs=", 0) == 0) {
      runs = std::stoull(arg.substr(6));
    } else if (arg.rfind("-seed=", 0) == 0) {
      seed = std::stoull(arg.substr(6));
    } else if (arg[0] == '-') {
      continue;  // libFuzzer's other flags mean nothing here
    } else if (DIR* dir = opendir(arg.c_str())) {
      while (dirent* entry = readdir(dir)) {
        if (entry->d_name[0] != '.') seeds.push_back(adreno_harness::ReadFile(arg + "/" + entry->d_name));
      }
      closedir(dir);
    } else {
      seeds.push_back(adreno_harness::ReadFile(arg));
    }
  }
  if (seeds.empty()) {
    std::fprintf(stderr, "no seed files\n");
    return 2;
  }
  for (const std::string& bytes : seeds) {  // every seed as it is first, as libFuzzer does
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::mt19937_64 rng(seed);
  for (uint64_t run = 0; run < runs; ++run) {
    std::string bytes = seeds[rng() % seeds.size()];
    for (uint64_t k = 1 + rng() % 8; k > 0; --k) Mutate(&bytes, &rng);
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("Done %llu runs over %zu seeds\n", static_cast<unsigned long long>(runs + seeds.size()), seeds.size());
  return 0;
}
