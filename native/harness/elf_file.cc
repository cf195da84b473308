#include "elf_file.h"

#include <elf.h>

#include <algorithm>
#include <cstring>

#include "atomic_file.h"

namespace adreno_harness {

std::string ElfProblem(const std::string& path) {
  const std::string data = ReadFile(path);
  const uint64_t size = data.size();
  Elf64_Ehdr header;
  if (size < sizeof(header) || std::memcmp(data.data(), ELFMAG, SELFMAG) != 0) {
    return "is not an ELF file (" + std::to_string(size) + " bytes)";
  }
  std::memcpy(&header, data.data(), sizeof(header));
  if (header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_ident[EI_DATA] != ELFDATA2LSB) {
    return "is not a 64-bit little-endian ELF file";
  }
  uint64_t needed = header.e_phoff + uint64_t{header.e_phnum} * header.e_phentsize;
  if (header.e_shnum != 0) needed = std::max(needed, header.e_shoff + uint64_t{header.e_shnum} * header.e_shentsize);
  if (needed > size) {
    return "is truncated (" + std::to_string(size) + " bytes, its headers need " + std::to_string(needed) + ")";
  }
  for (uint16_t i = 0; i < header.e_phnum; ++i) {
    Elf64_Phdr segment;
    std::memcpy(&segment, data.data() + header.e_phoff + uint64_t{i} * header.e_phentsize, sizeof(segment));
    if (segment.p_type == PT_LOAD && segment.p_offset + segment.p_filesz > size) {
      return "is truncated (" + std::to_string(size) + " bytes, its segments need " +
             std::to_string(segment.p_offset + segment.p_filesz) + ")";
    }
  }
  return "";
}

}  // namespace adreno_harness
