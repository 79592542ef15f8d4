#include "tokenizer/json_util.h"

#include "core/error.h"

namespace tandem::tok {
namespace {

const char* kind(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::object:
      return "an object";
    case Json::value_t::array:
      return "an array";
    case Json::value_t::string:
      return "a string";
    case Json::value_t::boolean:
      return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return "an integer";
    case Json::value_t::number_float:
      return "a number";
    default:
      return "an unknown value";
  }
}

}  // namespace

void json_fail(const std::string& path, const std::string& what) {
  fail("tokenizer.json field '{}': {}", path.empty() ? "<root>" : path, what);
}

std::string json_path(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

std::string json_path(const std::string& path, size_t index) {
  return fmt::format("{}[{}]", path, index);
}

const Json& json_required(const Json& obj, const std::string& path, const char* key) {
  if (!obj.is_object()) json_fail(path, fmt::format("expected an object, found {}", kind(obj)));
  auto it = obj.find(key);
  if (it == obj.end()) json_fail(json_path(path, key), "missing");
  return *it;
}

const Json* json_optional(const Json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string json_string(const Json& obj, const std::string& path, const char* key) {
  const Json& v = json_required(obj, path, key);
  if (!v.is_string()) {
    json_fail(json_path(path, key), fmt::format("expected a string, found {}", kind(v)));
  }
  return v.get<std::string>();
}

std::string json_string_or(const Json& obj, const std::string& path, const char* key,
                           const std::string& fallback) {
  if (!obj.is_object()) json_fail(path, fmt::format("expected an object, found {}", kind(obj)));
  const Json* v = json_optional(obj, key);
  if (v == nullptr) return fallback;
  if (!v->is_string()) {
    json_fail(json_path(path, key), fmt::format("expected a string, found {}", kind(*v)));
  }
  return v->get<std::string>();
}

bool json_bool_or(const Json& obj, const std::string& path, const char* key, bool fallback) {
  if (!obj.is_object()) json_fail(path, fmt::format("expected an object, found {}", kind(obj)));
  const Json* v = json_optional(obj, key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) {
    json_fail(json_path(path, key), fmt::format("expected a boolean, found {}", kind(*v)));
  }
  return v->get<bool>();
}

int64_t json_int(const Json& obj, const std::string& path, const char* key) {
  const Json& v = json_required(obj, path, key);
  if (!v.is_number_integer()) {
    json_fail(json_path(path, key), fmt::format("expected an integer, found {}", kind(v)));
  }
  return v.get<int64_t>();
}

int64_t json_int_or(const Json& obj, const std::string& path, const char* key, int64_t fallback) {
  if (json_optional(obj, key) == nullptr) return fallback;
  return json_int(obj, path, key);
}

const Json& json_array(const Json& obj, const std::string& path, const char* key) {
  const Json& v = json_required(obj, path, key);
  if (!v.is_array()) {
    json_fail(json_path(path, key), fmt::format("expected an array, found {}", kind(v)));
  }
  return v;
}

std::string json_type(const Json& obj, const std::string& path) {
  if (!obj.is_object()) json_fail(path, fmt::format("expected an object, found {}", kind(obj)));
  return json_string(obj, path, "type");
}

}  // namespace tandem::tok
