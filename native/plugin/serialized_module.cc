#include "serialized_module.h"

#include <zlib.h>

#include <cstring>
#include <stdexcept>

namespace adreno_native {

namespace {

class Reader {
 public:
  Reader(const std::string& bytes, const char* what) : bytes_(bytes), what_(what) {}

  uint64_t U64(const char* field) {
    uint64_t value = 0;
    Take(&value, sizeof(value), field);
    return value;
  }
  std::string String(const char* field) {
    uint64_t size = U64(field);
    Need(size, field);
    std::string value = bytes_.substr(pos_, size);
    pos_ += size;
    return value;
  }
  // A count of items of at least `item_bytes` each, refused when the rest of the bytes cannot hold them.
  uint64_t Count(const char* field, size_t item_bytes) {
    uint64_t count = U64(field);
    if (item_bytes && count > (bytes_.size() - pos_) / item_bytes) Fail(field, "a count beyond the bytes left");
    return count;
  }
  void Take(void* out, size_t size, const char* field) {
    Need(size, field);
    std::memcpy(out, bytes_.data() + pos_, size);
    pos_ += size;
  }
  void End() const {
    if (pos_ != bytes_.size()) {
      throw std::invalid_argument(std::string(what_) + ": " + std::to_string(bytes_.size() - pos_) +
                                  " bytes after the end");
    }
  }

 private:
  void Need(uint64_t size, const char* field) const {
    if (size > bytes_.size() - pos_) Fail(field, "truncated");
  }
  [[noreturn]] void Fail(const char* field, const char* problem) const {
    throw std::invalid_argument(std::string(what_) + ": " + problem + " at " + field + " (byte " +
                                std::to_string(pos_) + " of " + std::to_string(bytes_.size()) + ")");
  }
  const std::string& bytes_;
  const char* what_;
  size_t pos_ = 0;
};

class Writer {
 public:
  void U64(uint64_t value) { Raw(&value, sizeof(value)); }
  void String(const std::string& value) {
    U64(value.size());
    out_ += value;
  }
  void Raw(const void* data, size_t size) { out_.append(static_cast<const char*>(data), size); }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

static_assert(sizeof(ArgType) == 4, "a dtype is (u8 code, u8 bits, u16 lanes)");

constexpr const char* kCompressedSource = "cl.zlib";
constexpr uint64_t kMaxSourceBytes = uint64_t(1) << 30;  // a declared size past this is damage, not a model

// The OpenCL C source of a "cl.zlib" module's data: u64 source bytes, then its zlib stream.
std::string InflateSource(const std::string& data) {
  Reader in(data, "OpenCL module's compressed source");
  uint64_t size = in.U64("source size");
  if (size > kMaxSourceBytes) throw std::invalid_argument("OpenCL module: a compressed source of " +
                                                          std::to_string(size) + " bytes declared");
  std::string source(size, '\0');
  uLongf produced = static_cast<uLongf>(size);
  const auto* stream = reinterpret_cast<const Bytef*>(data.data() + sizeof(uint64_t));
  int status = uncompress(reinterpret_cast<Bytef*>(source.data()), &produced, stream,
                          static_cast<uLong>(data.size() - sizeof(uint64_t)));
  if (status != Z_OK || produced != size) {
    throw std::invalid_argument("OpenCL module: its compressed source does not inflate (zlib uncompress: " +
                                std::to_string(status) + ", " + std::to_string(produced) + " of " +
                                std::to_string(size) + " bytes)");
  }
  return source;
}

}  // namespace

const KernelInfo* SerializedModule::Find(const std::string& name) const {
  for (const auto& entry : kernels) {
    if (entry.first == name) return &entry.second;
  }
  return nullptr;
}

SerializedModule ParseModule(const std::string& bytes) {
  Reader in(bytes, "OpenCL module");
  SerializedModule module;
  module.format = in.String("format");
  uint64_t count = in.Count("kernel count", 16);
  for (uint64_t i = 0; i < count; ++i) {
    std::string key = in.String("kernel key");
    KernelInfo info;
    info.name = in.String("kernel name");
    info.arg_types.resize(in.Count("argument count", sizeof(ArgType)));
    for (ArgType& type : info.arg_types) in.Take(&type, sizeof(type), "argument type");
    uint64_t tags = in.Count("launch tag count", 8);
    for (uint64_t t = 0; t < tags; ++t) info.launch_param_tags.push_back(in.String("launch tag"));
    info.arg_extra_tags.resize(in.Count("argument tag count", sizeof(int32_t)));
    for (int32_t& tag : info.arg_extra_tags) in.Take(&tag, sizeof(tag), "argument tag");
    module.kernels.emplace_back(std::move(key), std::move(info));
  }
  module.data = in.String("data");
  in.End();
  if (module.format == kCompressedSource) {
    module.data = InflateSource(module.data);
    module.format = "cl";
  }
  return module;
}

std::string WriteModule(const SerializedModule& module) {
  Writer out;
  out.String(module.format);
  out.U64(module.kernels.size());
  for (const auto& [key, info] : module.kernels) {
    out.String(key);
    out.String(info.name);
    out.U64(info.arg_types.size());
    for (const ArgType& type : info.arg_types) out.Raw(&type, sizeof(type));
    out.U64(info.launch_param_tags.size());
    for (const std::string& tag : info.launch_param_tags) out.String(tag);
    out.U64(info.arg_extra_tags.size());
    for (int32_t tag : info.arg_extra_tags) out.Raw(&tag, sizeof(tag));
  }
  out.String(module.data);
  return out.Take();
}

ProgramBlob ParseProgramBlob(const std::string& bytes) {
  Reader in(bytes, "program blob");
  ProgramBlob blob;
  uint64_t count = in.Count("program count", 16);
  for (uint64_t i = 0; i < count; ++i) {
    std::string name = in.String("kernel name");
    std::string binary = in.String("program binary");
    if (name.empty() || binary.empty()) throw std::invalid_argument("program blob: an empty kernel name or binary");
    blob.emplace_back(std::move(name), std::move(binary));
  }
  in.End();
  return blob;
}

std::string WriteProgramBlob(const ProgramBlob& blob) {
  Writer out;
  out.U64(blob.size());
  for (const auto& [name, binary] : blob) {
    out.String(name);
    out.String(binary);
  }
  return out.Take();
}

}  // namespace adreno_native
