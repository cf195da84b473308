// Files the harness leaves behind appear whole or not at all: written to a temporary sibling, synced, renamed.
#ifndef ADRENO_HARNESS_ATOMIC_FILE_H_
#define ADRENO_HARNESS_ATOMIC_FILE_H_

#include <string>

namespace adreno_harness {

// Throws std::runtime_error naming the path and the OS error.
void WriteFileAtomically(const std::string& path, const std::string& bytes);
// The whole file, or throws std::runtime_error.
std::string ReadFile(const std::string& path);

}  // namespace adreno_harness

#endif  // ADRENO_HARNESS_ATOMIC_FILE_H_
