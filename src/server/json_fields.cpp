#include "server/json_fields.h"

#include <fmt/format.h>

#include <cmath>

namespace tandem::server {

namespace {

struct TooDeep {};

// Appends v's JSON text to out until out holds more than `budget` bytes. Every level adds at
// least one byte, so the recursion is no deeper than the budget.
void append_bounded(const Json& v, std::string& out, size_t budget) {
  if (out.size() > budget) return;
  if (v.is_array()) {
    out += '[';
    bool first = true;
    for (const Json& e : v) {
      if (out.size() > budget) return;
      if (!first) out += ", ";
      first = false;
      append_bounded(e, out, budget);
    }
    out += ']';
  } else if (v.is_object()) {
    out += '{';
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (out.size() > budget) return;
      if (!first) out += ", ";
      first = false;
      append_bounded(Json(it.key().substr(0, budget)), out, budget);
      out += ": ";
      append_bounded(it.value(), out, budget);
    }
    out += '}';
  } else if (v.is_string()) {
    // Only the start of a long string can show; dump_json repairs a cut UTF-8 character.
    const std::string& s = v.get_ref<const std::string&>();
    out += dump_json(s.size() > budget ? Json(s.substr(0, budget + 1)) : v);
  } else {
    out += dump_json(v);
  }
}

}  // namespace

std::string quote_json(const Json& j) {
  std::string out;
  append_bounded(j, out, kMaxQuotedValueChars);
  if (out.size() <= kMaxQuotedValueChars) return out;
  size_t cut = kMaxQuotedValueChars;
  while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;  // whole chars
  out.resize(cut);
  return out + "...";
}

Json parse_json_object(const std::string& body) {
  Json j;
  try {
    // The callback sees every value as it starts; depth counts the arrays/objects around it,
    // so an array or object starting at depth d is the (d + 1)-th level.
    j = Json::parse(body, [](int depth, Json::parse_event_t event, Json&) {
      if ((event == Json::parse_event_t::object_start ||
           event == Json::parse_event_t::array_start) &&
          depth >= kMaxJsonDepth)
        throw TooDeep{};
      return true;
    });
  } catch (const TooDeep&) {
    throw bad_request(fmt::format(
        "Invalid JSON in the request body: JSON nested deeper than {} levels", kMaxJsonDepth));
  } catch (const nlohmann::json::out_of_range&) {
    // A number beyond double's range (1e400). nlohmann's message quotes the whole literal, which
    // may be as long as the body, so it is not passed on.
    throw bad_request("Invalid JSON in the request body: a number is out of range");
  } catch (const nlohmann::json::parse_error& e) {
    // nlohmann's message says where parsing stopped ("... at line 1, column 12").
    std::string what = e.what();
    const auto tag = what.find("] ");  // strip the "[json.exception.parse_error.101]" tag
    throw bad_request("Invalid JSON in the request body: " +
                      (tag == std::string::npos ? what : what.substr(tag + 2)));
  }
  if (!j.is_object()) throw bad_request("The request body must be a JSON object");
  return j;
}

std::optional<Json> parse_json_bounded(std::string_view text) {
  try {
    return Json::parse(text, [](int depth, Json::parse_event_t event, Json&) {
      if ((event == Json::parse_event_t::object_start ||
           event == Json::parse_event_t::array_start) &&
          depth >= kMaxJsonDepth)
        throw TooDeep{};
      return true;
    });
  } catch (const TooDeep&) {
  } catch (const nlohmann::json::exception&) {
  }
  return std::nullopt;
}

std::string dump_json(const Json& j) {
  // replace: strings from clients were validated by the parser and generated text is repaired
  // by the detokenizer, so this only guards against a bug turning into an exception.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

bool is_integral(const Json& v) {
  if (v.is_number_integer()) return true;
  if (!v.is_number_float()) return false;
  const double d = v.get<double>();
  return std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2e18;
}

bool Fields::has(const char* key) const {
  return get(key) != nullptr;
}

const Json* Fields::get(const char* key) const {
  auto it = obj_.find(key);
  if (it == obj_.end() || it->is_null()) return nullptr;
  return &*it;
}

void Fields::fail_type(const char* key, const char* expected) const {
  const Json* v = get(key);
  throw bad_request(fmt::format("'{}' must be {}, got {}", param(key), expected,
                                v ? quote_json(*v) : std::string("null")),
                    param(key));
}

std::optional<double> Fields::number(const char* key) const {
  const Json* v = get(key);
  if (!v) return std::nullopt;
  if (!v->is_number()) fail_type(key, "a number");
  return v->get<double>();
}

std::optional<int64_t> Fields::integer(const char* key) const {
  const Json* v = get(key);
  if (!v) return std::nullopt;
  if (!is_integral(*v)) fail_type(key, "an integer");
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    fail_type(key, "an integer within int64");
  return v->is_number_float() ? static_cast<int64_t>(v->get<double>()) : v->get<int64_t>();
}

std::optional<bool> Fields::boolean(const char* key) const {
  const Json* v = get(key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) fail_type(key, "a boolean");
  return v->get<bool>();
}

std::optional<std::string> Fields::string(const char* key) const {
  const Json* v = get(key);
  if (!v) return std::nullopt;
  if (!v->is_string()) fail_type(key, "a string");
  return v->get<std::string>();
}

std::vector<std::string> Fields::string_or_list(const char* key) const {
  const Json* v = get(key);
  std::vector<std::string> out;
  if (!v) return out;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
    return out;
  }
  if (!v->is_array()) fail_type(key, "a string or a list of strings");
  for (const Json& e : *v) {
    if (!e.is_string()) fail_type(key, "a string or a list of strings");
    out.push_back(e.get<std::string>());
  }
  return out;
}

std::vector<int32_t> Fields::int_list(const char* key) const {
  const Json* v = get(key);
  std::vector<int32_t> out;
  if (!v) return out;
  if (!v->is_array()) fail_type(key, "a list of integers");
  for (const Json& e : *v) {
    if (!is_integral(e) || e.get<double>() < INT32_MIN || e.get<double>() > INT32_MAX)
      fail_type(key, "a list of integers");
    out.push_back(static_cast<int32_t>(e.get<double>()));
  }
  return out;
}

const Json* Fields::object(const char* key) const {
  const Json* v = get(key);
  if (v && !v->is_object()) fail_type(key, "an object");
  return v;
}

}  // namespace tandem::server
