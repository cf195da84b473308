#include "integrity.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <utility>
#include <vector>

#include "sha256.h"

namespace adreno_harness {

namespace ffi = tvm::ffi;

namespace {

// adreno.artifact.check.RUN_FIELDS
const char* const kRunFields[] = {"plan_format", "host_library", "host_params", "inputs", "outputs", "precision",
                                  "files"};

void AppendEscape(uint32_t unit, std::string* out) {
  char text[8];
  std::snprintf(text, sizeof(text), "\\u%04x", static_cast<unsigned>(unit));
  *out += text;
}

// A JSON string as Python writes it with ensure_ascii: printable ASCII as it is, the short escapes, every other code
// point as \uXXXX (a surrogate pair past U+FFFF).
void AppendString(const std::string& text, const std::string& where, std::string* out) {
  *out += '"';
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      ++i;
      if (c == '"' || c == '\\') {
        *out += '\\';
        *out += static_cast<char>(c);
      } else if (c == '\n') {
        *out += "\\n";
      } else if (c == '\r') {
        *out += "\\r";
      } else if (c == '\t') {
        *out += "\\t";
      } else if (c == '\b') {
        *out += "\\b";
      } else if (c == '\f') {
        *out += "\\f";
      } else if (c < 0x20 || c == 0x7f) {
        AppendEscape(c, out);
      } else {
        *out += static_cast<char>(c);
      }
      continue;
    }
    const int length = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
    if (length == 0 || c > 0xf4 || i + length > text.size()) {
      throw std::runtime_error(where + ": a string is not UTF-8");
    }
    uint32_t point = c & (0x7f >> length);
    for (int k = 1; k < length; ++k) {
      const unsigned char next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xc0) != 0x80) throw std::runtime_error(where + ": a string is not UTF-8");
      point = point << 6 | (next & 0x3f);
    }
    const uint32_t lowest[] = {0, 0, 0x80, 0x800, 0x10000};
    if (point < lowest[length] || point > 0x10ffff) throw std::runtime_error(where + ": a string is not UTF-8");
    i += length;
    if (point >= 0x10000) {
      AppendEscape(0xd800 + ((point - 0x10000) >> 10), out);
      AppendEscape(0xdc00 + ((point - 0x10000) & 0x3ff), out);
    } else {
      AppendEscape(point, out);
    }
  }
  *out += '"';
}

void Append(const json::Value& value, const std::string& where, int depth, std::string* out) {
  if (depth > 64) throw std::runtime_error(where + ": nested too deep");
  switch (value.type_index()) {
    case ffi::TypeIndex::kTVMFFINone:
      *out += "null";
      return;
    case ffi::TypeIndex::kTVMFFIBool:
      *out += *value.as<bool>() ? "true" : "false";
      return;
    case ffi::TypeIndex::kTVMFFIInt:
      *out += std::to_string(*value.as<int64_t>());
      return;
    default:
      break;
  }
  if (auto text = value.as<ffi::String>()) {
    AppendString(std::string(*text), where, out);
  } else if (auto list = value.as<json::Array>()) {
    *out += '[';
    bool first = true;
    for (const json::Value& item : *list) {
      if (!first) *out += ',';
      first = false;
      Append(item, where, depth + 1, out);
    }
    *out += ']';
  } else if (auto object = value.as<json::Object>()) {
    std::vector<std::pair<std::string, json::Value>> entries;
    for (const auto& [key, item] : *object) entries.emplace_back(AsString(key, where + " key"), item);
    std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    *out += '{';
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i) *out += ',';
      AppendString(entries[i].first, where, out);
      *out += ':';
      Append(entries[i].second, where, depth + 1, out);
    }
    *out += '}';
  } else {
    throw std::runtime_error(where + " holds a " + value.GetTypeKey() + ", which adreno never writes there");
  }
}

}  // namespace

std::string CanonicalJson(const json::Value& value, const std::string& where) {
  std::string out;
  Append(value, where, 0, &out);
  return out;
}

void VerifyRunDigest(const json::Object& manifest) {
  if (!Has(manifest, "run_sha256")) {
    throw std::runtime_error("manifest.json has no run_sha256: written by an older adreno; recompile the model");
  }
  json::Object fields;
  for (const char* key : kRunFields) {
    if (Has(manifest, key)) fields.Set(ffi::String(key), Field(manifest, key, "manifest.json"));
  }
  if (Has(manifest, "shape_sets")) {  // an artifact of several sets: each set's plan and its own fields of kRunFields
    json::Array sets;
    for (const json::Value& item : ArrayField(manifest, "shape_sets", "manifest.json")) {
      const json::Object entry = AsObject(item, "manifest.json shape_sets entry");
      const json::Object own = ObjectField(entry, "manifest", "manifest.json shape_sets entry");
      json::Object projected;
      for (const char* key : kRunFields) {
        if (Has(own, key)) projected.Set(ffi::String(key), Field(own, key, "manifest.json shape_sets entry"));
      }
      json::Object kept;
      kept.Set(ffi::String("plan"), Field(entry, "plan", "manifest.json shape_sets entry"));
      kept.Set(ffi::String("manifest"), projected);
      sets.push_back(kept);
    }
    fields.Set(ffi::String("shape_sets"), sets);
  }
  const std::string text = CanonicalJson(fields, "manifest.json");
  if (Sha256Hex(text.data(), text.size()) != StringField(manifest, "run_sha256", "manifest.json")) {
    throw std::runtime_error("manifest.json: the fields that decide what runs (host_params, inputs, outputs, files, "
                             "...) differ from their run_sha256: edited or damaged; recompile the model");
  }
}

void VerifyListedFile(const json::Object& manifest, const std::string& rel, const void* data, size_t size) {
  const json::Object entry = ObjectField(ObjectField(manifest, "files", "manifest.json"), rel.c_str(),
                                         "manifest.json files");
  const int64_t listed = IntField(entry, "bytes", "manifest.json files " + rel);
  if (listed < 0 || static_cast<uint64_t>(listed) != size) {
    throw std::runtime_error(rel + ": " + std::to_string(size) + " bytes, the manifest lists " +
                             std::to_string(listed) + ": changed since compile; recompile the model");
  }
  if (Sha256Hex(data, size) != StringField(entry, "sha256", "manifest.json files " + rel)) {
    throw std::runtime_error(rel + ": its SHA-256 differs from the manifest's: changed since compile; recompile the "
                             "model");
  }
}

}  // namespace adreno_harness
