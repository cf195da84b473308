#include "index_checks.h"

#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>

namespace adreno_harness {
namespace {

namespace json = tvm::ffi::json;

std::optional<json::Object> Entry(const json::Object& manifest) {
  auto found = manifest.find(tvm::ffi::String("index_checks"));
  if (found == manifest.end()) return std::nullopt;
  auto entry = (*found).second.try_cast<json::Object>();
  if (!entry) throw std::runtime_error("manifest.json: \"index_checks\" is not an object; recompile the model");
  return entry;
}

template <typename T>
T Field(const json::Object& object, const char* key) {
  auto found = object.find(tvm::ffi::String(key));
  std::optional<T> value = found == object.end() ? std::nullopt : (*found).second.try_cast<T>();
  if (!value) throw std::runtime_error(std::string("manifest.json: index_checks lacks \"") + key + "\"");
  return *value;
}

// "-2..1" per size (0..n-1 where negative indices do not wrap), comma-separated.
std::string Ranges(const json::Object& node) {
  auto wraps = node.find(tvm::ffi::String("wraps"));
  bool negative = wraps == node.end() || (*wraps).second.try_cast<bool>().value_or(true);
  std::string out;
  for (const tvm::ffi::Any& size : Field<json::Array>(node, "sizes")) {
    int64_t n = size.cast<int64_t>();
    out += (out.empty() ? "" : ", ") + std::to_string(negative ? -n : 0) + ".." + std::to_string(n - 1);
  }
  return out;
}

}  // namespace

bool IsIndexFlags(const json::Object& manifest, const std::string& tensor) {
  std::optional<json::Object> entry = Entry(manifest);
  return entry && std::string(Field<tvm::ffi::String>(*entry, "tensor")) == tensor;
}

void CheckIndexFlags(const json::Object& manifest, const std::string& last_tensor, const NpyArray& flags) {
  std::optional<json::Object> entry = Entry(manifest);
  if (!entry) return;
  if (std::string(Field<tvm::ffi::String>(*entry, "tensor")) != last_tensor) {
    throw std::runtime_error("manifest.json: index_checks do not name the plan's last output " + last_tensor +
                             "; recompile the model");
  }
  json::Array nodes = Field<json::Array>(*entry, "nodes");
  if (flags.dtype != "int32" || flags.data.size() != nodes.size() * sizeof(int32_t)) {
    throw std::runtime_error("the index flags are " + flags.dtype + ", not one int32 per node of manifest.json");
  }
  int first = -1, set = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    int32_t flag;
    std::memcpy(&flag, flags.data.data() + i * sizeof(flag), sizeof(flag));
    if (flag == 0) continue;
    if (first < 0) first = static_cast<int>(i);
    ++set;
  }
  if (first < 0) return;
  json::Object node = nodes[first].cast<json::Object>();
  std::string more = set > 1 ? " (and " + std::to_string(set - 1) + (set == 2 ? " more node)" : " more nodes)") : "";
  throw std::runtime_error("node " + std::string(Field<tvm::ffi::String>(node, "node")) + " (" +
                           std::string(Field<tvm::ffi::String>(node, "op")) + "): an index computed from this input "
                           "is outside " + Ranges(node) + ", which ONNX makes an error; no output is returned" + more);
}

}  // namespace adreno_harness
