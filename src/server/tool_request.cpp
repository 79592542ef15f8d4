#include "server/tool_request.h"

#include <fmt/format.h>

namespace tandem::server {

namespace {

void validate_tools(const Json& tools) {
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& t = tools[i];
    const std::string where = fmt::format("tools[{}]", i);
    if (!t.is_object()) throw bad_request(fmt::format("'{}' must be an object", where), where);
    auto type = t.find("type");
    if (type != t.end() && !type->is_null() && *type != "function")
      throw bad_request(
          fmt::format("'{}.type' must be \"function\", got {}", where, quote_json(*type)),
          where + ".type");
    auto fn = t.find("function");
    if (fn == t.end() || !fn->is_object())
      throw bad_request(fmt::format("'{}.function' must be an object with a 'name'", where),
                        where + ".function");
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string() || name->get_ref<const std::string&>().empty())
      throw bad_request(fmt::format("'{}.function.name' must be a non-empty string", where),
                        where + ".function.name");
    auto params = fn->find("parameters");
    if (params != fn->end() && !params->is_null() && !params->is_object())
      throw bad_request(fmt::format("'{}.function.parameters' must be a JSON Schema object", where),
                        where + ".function.parameters");
  }
}

bool has_function(const Json& tools, const std::string& name) {
  if (tools.is_null()) return false;
  for (const Json& t : tools)
    if (t["function"]["name"] == name) return true;
  return false;
}

ToolChoice read_tool_choice(const Json& v, const Json& tools) {
  ToolChoice c;
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (s == "auto") return c;
    if (s == "none") {
      c.mode = ToolChoice::Mode::kNone;
      return c;
    }
    if (s == "required") {
      if (tools.is_null())
        throw bad_request("tool_choice \"required\" needs a non-empty 'tools' list", "tool_choice");
      c.mode = ToolChoice::Mode::kRequired;
      return c;
    }
    throw bad_request(fmt::format("'tool_choice' must be \"auto\", \"none\", \"required\" or "
                                  "{{\"type\": \"function\", \"function\": {{\"name\": ...}}}}, "
                                  "got {}",
                                  quote_json(v)),
                      "tool_choice");
  }
  const Json* name = nullptr;
  if (v.is_object()) {
    auto type = v.find("type");
    auto fn = v.find("function");
    if (type != v.end() && *type == "function" && fn != v.end() && fn->is_object()) {
      auto n = fn->find("name");
      if (n != fn->end() && n->is_string()) name = &*n;
    }
  }
  if (!name)
    throw bad_request(fmt::format("'tool_choice' must be a string or {{\"type\": \"function\", "
                                  "\"function\": {{\"name\": ...}}}}, got {}",
                                  quote_json(v)),
                      "tool_choice");
  c.mode = ToolChoice::Mode::kFunction;
  c.function = name->get<std::string>();
  if (!has_function(tools, c.function))
    throw bad_request(fmt::format("tool_choice names the function {}, which is not in 'tools'",
                                  quote_json(*name)),
                      "tool_choice");
  return c;
}

}  // namespace

Json ToolRequest::template_tools() const {
  if (tools.is_null() || choice.mode == ToolChoice::Mode::kNone) return nullptr;
  if (choice.mode != ToolChoice::Mode::kFunction) return tools;
  Json only = Json::array();
  for (const Json& t : tools)
    if (t["function"]["name"] == choice.function) only.push_back(t);
  return only;
}

ToolRequest parse_tool_request(const Fields& f) {
  ToolRequest r;
  if (const Json* tools = f.get("tools")) {
    if (!tools->is_array()) f.fail_type("tools", "a list of tool objects");
    validate_tools(*tools);
    if (!tools->empty()) r.tools = *tools;
  }
  // OpenAI's default is "none" without tools and "auto" with them; both mean no calls then.
  if (const Json* tc = f.get("tool_choice")) r.choice = read_tool_choice(*tc, r.tools);
  if (auto v = f.boolean("parallel_tool_calls")) r.parallel_tool_calls = *v;
  return r;
}

}  // namespace tandem::server
