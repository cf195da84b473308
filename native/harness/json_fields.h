// The JSON files of an artifact (manifest.json, plan.json) as the harness reads them: parsed only when their nesting
// is shallow (TVM's parser recurses: 100,000 brackets overflow its stack), and every field read with its exact type,
// so that a field of the wrong type, a bool for a number or a float for an extent, is a one-line refusal naming the
// file and the field rather than a conversion or a TVM traceback.
#ifndef ADRENO_HARNESS_JSON_FIELDS_H_
#define ADRENO_HARNESS_JSON_FIELDS_H_

#include <tvm/ffi/extra/json.h>

#include <cstdint>
#include <string>
#include <vector>

namespace adreno_harness {

namespace json = tvm::ffi::json;

// The object `text` holds; throws std::runtime_error "<where>: ..." when it is not JSON, not an object, or nested
// deeper than 64 levels (adreno's files nest 6).
json::Object ParseJsonObject(const std::string& text, const std::string& where);

// object[key] of the given type; throws std::runtime_error "<where>: \"key\" ..." when absent or of another type.
json::Value Field(const json::Object& object, const char* key, const std::string& where);
bool Has(const json::Object& object, const char* key);
std::string StringField(const json::Object& object, const char* key, const std::string& where);
int64_t IntField(const json::Object& object, const char* key, const std::string& where);
bool BoolField(const json::Object& object, const char* key, const std::string& where);
json::Object ObjectField(const json::Object& object, const char* key, const std::string& where);
json::Array ArrayField(const json::Object& object, const char* key, const std::string& where);

std::string AsString(const json::Value& value, const std::string& what);
int64_t AsInt(const json::Value& value, const std::string& what);
double AsNumber(const json::Value& value, const std::string& what);  // an int or a float, never a bool
json::Object AsObject(const json::Value& value, const std::string& what);
// A list of non-negative ints of at most 2^40 elements in all (checked.h).
std::vector<int64_t> AsShape(const json::Value& value, const std::string& what);

}  // namespace adreno_harness

#endif  // ADRENO_HARNESS_JSON_FIELDS_H_
