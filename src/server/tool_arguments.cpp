#include "server/tool_arguments.h"

#include "server/text_scan.h"

namespace tandem::server {

namespace {

void dump_py(const Json& v, std::string& out) {
  if (v.is_object()) {
    out += '{';
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!first) out += ", ";
      first = false;
      out += dump_json(Json(it.key()));
      out += ": ";
      dump_py(it.value(), out);
    }
    out += '}';
  } else if (v.is_array()) {
    out += '[';
    bool first = true;
    for (const Json& e : v) {
      if (!first) out += ", ";
      first = false;
      dump_py(e, out);
    }
    out += ']';
  } else {
    out += dump_json(v);
  }
}

}  // namespace

ArgType argument_type(const Json* parameters, const std::string& key) {
  if (!parameters || !parameters->is_object()) return ArgType::kAuto;
  auto props = parameters->find("properties");
  if (props == parameters->end() || !props->is_object()) return ArgType::kAuto;
  auto prop = props->find(key);
  if (prop == props->end() || !prop->is_object()) return ArgType::kAuto;
  auto type = prop->find("type");
  if (type != prop->end()) {
    if (type->is_string()) return *type == "string" ? ArgType::kString : ArgType::kJson;
    if (type->is_array() && !type->empty()) {
      size_t strings = 0;
      for (const Json& t : *type) strings += t == "string";
      // ["string", "null"] could be either: the text decides.
      return strings == type->size() ? ArgType::kString
             : strings == 0          ? ArgType::kJson
                                     : ArgType::kAuto;
    }
  }
  auto values = prop->find("enum");
  if (values != prop->end() && values->is_array() && !values->empty()) {
    for (const Json& e : *values)
      if (!e.is_string()) return ArgType::kAuto;
    return ArgType::kString;
  }
  return ArgType::kAuto;
}

Json argument_value(std::string_view text, ArgType type) {
  if (type == ArgType::kString) return Json(std::string(text));
  if (auto v = parse_json_bounded(trim(text))) return *v;
  return Json(std::string(text));
}

std::string dump_arguments_json(const Json& v) {
  std::string out;
  dump_py(v, out);
  return out;
}

std::string ArgumentsWriter::key_prefix(const std::string& key) {
  std::string out = first_ ? "{" : ", ";
  first_ = false;
  return out + dump_json(Json(key)) + ": ";
}

std::string ArgumentsWriter::value(const std::string& key, const Json& v) {
  return key_prefix(key) + dump_arguments_json(v);
}

std::string ArgumentsWriter::begin_string(const std::string& key) {
  return key_prefix(key) + "\"";
}

std::string ArgumentsWriter::string_piece(std::string_view raw) {
  if (raw.empty()) return "";
  // Escaping works character by character, so pieces cut between characters escape to pieces
  // of the whole string's escape.
  const std::string quoted = dump_json(Json(std::string(raw)));
  return quoted.substr(1, quoted.size() - 2);
}

}  // namespace tandem::server
