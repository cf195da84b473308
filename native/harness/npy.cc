#include "npy.h"

#include <cstdio>
#include <cstring>
#include <map>
#include <stdexcept>

#include "atomic_file.h"
#include "checked.h"

namespace adreno_harness {

namespace {

// dtype name <-> NumPy descr of the types the harness moves.
const std::map<std::string, std::string>& Descrs() {
  static const std::map<std::string, std::string> table = {
      {"float32", "<f4"}, {"float16", "<f2"}, {"int64", "<i8"}, {"int32", "<i4"},
      {"int8", "|i1"},    {"uint8", "|u1"},   {"bool", "|b1"}};
  return table;
}

// The header's dictionary, read by the grammar numpy's reader accepts (a Python dict literal that ast.literal_eval
// evaluates: exactly the keys 'descr', 'fortran_order' and 'shape'), cut down to what numpy writes: a string descr,
// a bool, a tuple of non-negative decimal ints, spaces between tokens, an optional trailing comma, spaces and a newline
// after the '}'. Nothing numpy refuses passes (a nested list, a '$' in the padding, a negative extent); a key given
// twice is refused too (numpy keeps the last, an easy way to make two readers disagree).
class HeaderReader {
 public:
  HeaderReader(const std::string& text, const std::string& where) : text_(text), where_(where) {}

  void Read(std::string* descr, bool* fortran, std::vector<int64_t>* shape) {
    Expect('{');
    bool seen[3] = {false, false, false};
    while (true) {
      Skip();
      if (Peek() == '}') break;
      const std::string key = String("key");
      Expect(':');
      int index = key == "descr" ? 0 : key == "fortran_order" ? 1 : key == "shape" ? 2 : -1;
      if (index < 0) Fail("has the key '" + key + "', which numpy's headers do not");
      if (seen[index]) Fail("has the key '" + key + "' twice");
      seen[index] = true;
      Skip();
      if (index == 0) *descr = String("descr");
      if (index == 1) *fortran = Bool();
      if (index == 2) *shape = Shape();
      Skip();
      if (Peek() != ',') break;
      ++at_;
    }
    Expect('}');
    if (!seen[0] || !seen[1] || !seen[2]) Fail("lacks one of 'descr', 'fortran_order' and 'shape'");
    while (at_ < text_.size() && text_[at_] == ' ') ++at_;
    if (at_ < text_.size() && text_[at_] == '\n') ++at_;
    if (at_ != text_.size()) Fail("has bytes after its dictionary other than spaces and a newline");
  }

 private:
  [[noreturn]] void Fail(const std::string& what) const {
    throw std::runtime_error(where_ + ": .npy header " + what);
  }
  char Peek() const { return at_ < text_.size() ? text_[at_] : '\0'; }
  void Skip() {
    while (at_ < text_.size() && text_[at_] == ' ') ++at_;
  }
  void Expect(char c) {
    Skip();
    if (Peek() != c) Fail(std::string("is malformed: '") + c + "' expected at byte " + std::to_string(at_));
    ++at_;
  }
  std::string String(const char* what) {
    Skip();
    const char quote = Peek();
    if (quote != '\'' && quote != '"') Fail(std::string("is malformed: a quoted ") + what + " expected");
    const size_t close = text_.find(quote, at_ + 1);
    if (close == std::string::npos) Fail("has an unterminated string");
    std::string value = text_.substr(at_ + 1, close - at_ - 1);
    if (value.find_first_not_of("abcdefghijklmnopqrstuvwxyz_<>|=0123456789") != std::string::npos) {
      Fail(std::string("has a ") + what + " with characters numpy never writes there");
    }
    at_ = close + 1;
    return value;
  }
  bool Bool() {
    if (text_.compare(at_, 4, "True") == 0) return at_ += 4, true;
    if (text_.compare(at_, 5, "False") == 0) return at_ += 5, false;
    Fail("has a fortran_order that is neither True nor False");
  }
  std::vector<int64_t> Shape() {
    Expect('(');
    std::vector<int64_t> shape;
    bool comma = false;
    while (true) {
      Skip();
      if (Peek() == ')') break;
      if (Peek() < '0' || Peek() > '9') Fail("has a shape that is not a tuple of non-negative integers");
      if (Peek() == '0' && at_ + 1 < text_.size() && text_[at_ + 1] >= '0' && text_[at_ + 1] <= '9') {
        Fail("has a shape extent with a leading zero");
      }
      uint64_t value = 0;
      while (Peek() >= '0' && Peek() <= '9') {
        if (__builtin_mul_overflow(value, 10, &value) || __builtin_add_overflow(value, Peek() - '0', &value) ||
            value > kMaxElements) {
          Fail("has a shape extent beyond 2^40");
        }
        ++at_;
      }
      shape.push_back(static_cast<int64_t>(value));
      Skip();
      comma = Peek() == ',';
      if (!comma) break;
      ++at_;
    }
    Expect(')');
    if (shape.size() == 1 && !comma) Fail("has a shape that is an integer in brackets, not a tuple");
    return shape;
  }

  const std::string& text_;
  const std::string where_;
  size_t at_ = 0;
};

}  // namespace

std::string DimsText(const std::vector<int64_t>& shape) {
  std::string text;
  for (int64_t d : shape) text += (text.empty() ? "" : "x") + std::to_string(d);
  return text;
}

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
  // numpy reads headers of at most 10,000 bytes (np.load's max_header_size) and only versions 1.0, 2.0 and 3.0
  constexpr size_t kMaxHeader = 10000;
  if (size < 10 || std::memcmp(data, "\x93NUMPY", 6) != 0) throw std::runtime_error(path + ": not a .npy file");
  const int major = static_cast<unsigned char>(data[6]), minor = static_cast<unsigned char>(data[7]);
  if ((major != 1 && major != 2 && major != 3) || minor != 0) {
    throw std::runtime_error(path + ": .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                             " is unknown");
  }
  uint64_t header_len = 0, start = major == 1 ? 10 : 12;
  if (major == 1) {
    header_len = static_cast<unsigned char>(data[8]) | (static_cast<unsigned char>(data[9]) << 8);
  } else {
    if (size < 12) throw std::runtime_error(path + ": truncated .npy header");
    uint32_t len = 0;
    std::memcpy(&len, data + 8, 4);
    header_len = len;
  }
  if (header_len > kMaxHeader) {
    throw std::runtime_error(path + ": .npy header of " + std::to_string(header_len) + " bytes (numpy reads 10000 "
                             "at most)");
  }
  const uint64_t data_start = CheckedAdd(start, header_len, size, path, ".npy header length");
  const std::string header(data + start, header_len);
  NpyView array;
  std::string descr;
  bool fortran = false;
  HeaderReader(header, path).Read(&descr, &fortran, &array.shape);
  for (const auto& [name, text] : Descrs()) {
    if (text == descr || (text[0] == '|' && descr.size() == 3 && descr.find_first_of("|<>=") == 0 &&
                          descr.substr(1) == text.substr(1))) {
      array.dtype = name;
    }
  }
  if (array.dtype.empty()) throw std::runtime_error(path + ": dtype " + descr + " is not float32, float16, int64, "
                                                   "int32, int8, uint8 or bool (little-endian)");
  if (fortran) throw std::runtime_error(path + ": Fortran-order arrays are not read; save a C-order array");
  const uint64_t count = CheckedElements(array.shape, path);
  const uint64_t nbytes = count * DtypeBytes(array.dtype);  // at most 2^43: no wrap
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
