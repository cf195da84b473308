// What the dynamic loader needs of a shared library before it maps it: every byte its headers name.
//
// dlopen maps a library's segments as its program headers say, without comparing them with the file's size: a
// truncated lib.so (a copy cut short, a partial download) maps fine and the first access past its end is a SIGBUS
// that kills the app with no message. Reading the headers first turns that into one line (adreno/native/elf_file.py
// does the same for `adreno run --runtime tvm`).
#ifndef ADRENO_HARNESS_ELF_FILE_H_
#define ADRENO_HARNESS_ELF_FILE_H_

#include <string>

namespace adreno_harness {

// "" when `path` is a 64-bit little-endian ELF file whose headers and loadable segments lie inside it; otherwise
// why not ("is truncated (N bytes, its segments need M)", "is not an ELF file", ...). Throws when it cannot be read.
std::string ElfProblem(const std::string& path);

}  // namespace adreno_harness

#endif  // ADRENO_HARNESS_ELF_FILE_H_
