#include "npy.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <stdexcept>

#include "atomic_file.h"

namespace adreno_harness {

namespace {

// dtype name <-> NumPy descr of the types the harness moves.
const std::map<std::string, std::string>& Descrs() {
  static const std::map<std::string, std::string> table = {
      {"float32", "<f4"}, {"float16", "<f2"}, {"int64", "<i8"}, {"int32", "<i4"},
      {"int8", "|i1"},    {"uint8", "|u1"},   {"bool", "|b1"}};
  return table;
}

std::string Field(const std::string& header, const std::string& key, const std::string& path) {
  size_t at = header.find("'" + key + "'");
  if (at == std::string::npos) throw std::runtime_error(path + ": .npy header has no '" + key + "'");
  size_t colon = header.find(':', at);
  if (colon == std::string::npos) throw std::runtime_error(path + ": malformed .npy header");
  return header.substr(colon + 1);
}

}  // namespace

size_t DtypeBytes(const std::string& dtype) {
  if (dtype == "float32" || dtype == "int32") return 4;
  if (dtype == "float16") return 2;
  if (dtype == "int64") return 8;
  if (dtype == "int8" || dtype == "uint8" || dtype == "bool") return 1;
  throw std::invalid_argument("dtype " + dtype + " is not one the harness reads or writes");
}

NpyArray ReadNpy(const std::string& path) {
  const std::string bytes = ReadFile(path);
  NpyView view = ParseNpy(bytes.data(), bytes.size(), path);
  return {view.dtype, view.shape, std::string(view.data, view.size)};
}

NpyView ParseNpy(const char* data, size_t size, const std::string& path) {
  const std::string bytes(data, std::min<size_t>(size, 65536 + 12));  // the header (at most 64 KiB in v1)
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) throw std::runtime_error(path + ": not a .npy file");
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len = 0, start = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) throw std::runtime_error(path + ": truncated .npy header");
    uint32_t len = 0;
    std::memcpy(&len, bytes.data() + 8, 4);
    header_len = len;
    start = 12;
  } else {
    throw std::runtime_error(path + ": .npy format version " + std::to_string(major) + " is unknown");
  }
  if (start + header_len > bytes.size()) throw std::runtime_error(path + ": truncated .npy header");
  const std::string header = bytes.substr(start, header_len);
  NpyView array;
  std::string descr = Field(header, "descr", path);
  size_t q1 = descr.find('\''), q2 = descr.find('\'', q1 + 1);
  descr = descr.substr(q1 + 1, q2 - q1 - 1);
  for (const auto& [name, text] : Descrs()) {
    if (text == descr || (text[0] == '|' && descr.size() == 3 && descr.substr(1) == text.substr(1))) array.dtype = name;
  }
  if (array.dtype.empty()) throw std::runtime_error(path + ": dtype " + descr + " is not float32, float16, int64, "
                                                   "int32, int8, uint8 or bool (little-endian)");
  if (Field(header, "fortran_order", path).find("False") > 2) {
    throw std::runtime_error(path + ": Fortran-order arrays are not read; save a C-order array");
  }
  std::string shape = Field(header, "shape", path);
  shape = shape.substr(shape.find('(') + 1, shape.find(')') - shape.find('(') - 1);
  size_t count = 1;
  for (size_t pos = 0; pos < shape.size();) {
    size_t comma = shape.find(',', pos);
    std::string item = shape.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (item.find_first_of("0123456789") != std::string::npos) {
      array.shape.push_back(std::stoll(item));
      count *= static_cast<size_t>(array.shape.back());
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  const size_t nbytes = count * DtypeBytes(array.dtype), data_start = start + header_len;
  if (size - data_start != nbytes) {
    throw std::runtime_error(path + ": holds " + std::to_string(size - data_start) + " data bytes, its shape "
                             "needs " + std::to_string(nbytes));
  }
  array.data = data + data_start;
  array.size = nbytes;
  return array;
}

void WriteNpy(const std::string& path, const NpyArray& array) {
  std::string shape;
  for (int64_t d : array.shape) shape += std::to_string(d) + ", ";
  if (array.shape.size() > 1) shape.resize(shape.size() - 1);
  std::string header = "{'descr': '" + Descrs().at(array.dtype) + "', 'fortran_order': False, 'shape': (" + shape + "), }";
  // The magic, version and length (10 bytes) plus the header end on a 64-byte boundary, with a newline last.
  size_t padded = ((10 + header.size() + 1 + 63) / 64) * 64 - 10;
  header.append(padded - header.size() - 1, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out += array.data;
  WriteFileAtomically(path, out);
}

}  // namespace adreno_harness
