// Field access for tokenizer.json with errors that name the field by its path (for example
// "model.merges[3]"), so a malformed file says exactly what is wrong and where.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace tandem::tok {

using Json = nlohmann::json;

[[noreturn]] void json_fail(const std::string& path, const std::string& what);

// "path.key", or "key" at the top level.
std::string json_path(const std::string& path, const std::string& key);
std::string json_path(const std::string& path, size_t index);

// The member `key` of the object at `path`; absent members throw.
const Json& json_required(const Json& obj, const std::string& path, const char* key);
// nullptr when `key` is absent or null.
const Json* json_optional(const Json& obj, const char* key);

std::string json_string(const Json& obj, const std::string& path, const char* key);
// A string member that may be absent or null (then `fallback`).
std::string json_string_or(const Json& obj, const std::string& path, const char* key,
                           const std::string& fallback);
bool json_bool_or(const Json& obj, const std::string& path, const char* key, bool fallback);
int64_t json_int(const Json& obj, const std::string& path, const char* key);
int64_t json_int_or(const Json& obj, const std::string& path, const char* key, int64_t fallback);
const Json& json_array(const Json& obj, const std::string& path, const char* key);
// The "type" tag of a component object ("BPE", "Split", ...).
std::string json_type(const Json& obj, const std::string& path);

}  // namespace tandem::tok
