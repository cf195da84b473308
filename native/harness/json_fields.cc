#include "json_fields.h"

#include <stdexcept>

#include "checked.h"

namespace adreno_harness {

namespace ffi = tvm::ffi;

namespace {

constexpr int kMaxDepth = 64;

// The deepest nesting of brackets outside strings, scanning no further than past kMaxDepth.
bool Shallow(const std::string& text) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxDepth) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

[[noreturn]] void WrongType(const std::string& what, const char* wanted) {
  throw std::runtime_error(what + " is not " + wanted);
}

}  // namespace

json::Object ParseJsonObject(const std::string& text, const std::string& where) {
  if (!Shallow(text)) throw std::runtime_error(where + ": nested deeper than " + std::to_string(kMaxDepth) + " levels");
  ffi::String error;
  json::Value value = json::Parse(text, &error);
  if (!error.empty()) throw std::runtime_error(where + ": not JSON (" + std::string(error) + ")");
  auto object = value.as<json::Object>();
  if (!object) throw std::runtime_error(where + ": not a JSON object");
  return *object;
}

bool Has(const json::Object& object, const char* key) { return object.find(ffi::String(key)) != object.end(); }

json::Value Field(const json::Object& object, const char* key, const std::string& where) {
  auto found = object.find(ffi::String(key));
  if (found == object.end()) throw std::runtime_error(where + " has no \"" + key + "\"");
  return (*found).second;
}

std::string AsString(const json::Value& value, const std::string& what) {
  auto text = value.as<ffi::String>();
  if (!text) WrongType(what, "a string");
  return std::string(*text);
}

int64_t AsInt(const json::Value& value, const std::string& what) {
  auto number = value.as<int64_t>();
  if (!number || value.type_index() != ffi::TypeIndex::kTVMFFIInt) WrongType(what, "an integer");
  return *number;
}

double AsNumber(const json::Value& value, const std::string& what) {
  if (value.type_index() == ffi::TypeIndex::kTVMFFIInt) return static_cast<double>(*value.as<int64_t>());
  if (value.type_index() == ffi::TypeIndex::kTVMFFIFloat) return *value.as<double>();
  WrongType(what, "a number");
}

json::Object AsObject(const json::Value& value, const std::string& what) {
  auto object = value.as<json::Object>();
  if (!object) WrongType(what, "an object");
  return *object;
}

std::vector<int64_t> AsShape(const json::Value& value, const std::string& what) {
  auto list = value.as<json::Array>();
  if (!list) WrongType(what, "a list of extents");
  std::vector<int64_t> shape;
  for (const json::Value& d : *list) shape.push_back(AsInt(d, what + " extent"));
  CheckedElements(shape, what);
  return shape;
}

std::string StringField(const json::Object& object, const char* key, const std::string& where) {
  return AsString(Field(object, key, where), where + " \"" + key + "\"");
}

int64_t IntField(const json::Object& object, const char* key, const std::string& where) {
  return AsInt(Field(object, key, where), where + " \"" + key + "\"");
}

bool BoolField(const json::Object& object, const char* key, const std::string& where) {
  json::Value value = Field(object, key, where);
  if (value.type_index() != ffi::TypeIndex::kTVMFFIBool) WrongType(where + " \"" + key + "\"", "true or false");
  return *value.as<bool>();
}

json::Object ObjectField(const json::Object& object, const char* key, const std::string& where) {
  return AsObject(Field(object, key, where), where + " \"" + key + "\"");
}

json::Array ArrayField(const json::Object& object, const char* key, const std::string& where) {
  auto list = Field(object, key, where).as<json::Array>();
  if (!list) WrongType(where + " \"" + key + "\"", "a list");
  return *list;
}

}  // namespace adreno_harness
