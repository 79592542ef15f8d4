#include "server/tool_call_parser.h"

#include <fmt/format.h>

#include <random>

#include "core/log.h"
#include "server/text_scan.h"
#include "server/tool_call_formats.h"

namespace tandem::server {

ToolSet::ToolSet(const Json& tools) {
  if (!tools.is_array()) return;
  for (const Json& t : tools) {
    const Json& fn = t.at("function");
    auto params = fn.find("parameters");
    functions_.push_back(
        {fn.at("name").get<std::string>(), params == fn.end() ? Json() : Json(*params)});
  }
}

const ToolSet::Function* ToolSet::find(std::string_view name) const {
  for (const Function& f : functions_)
    if (f.name == name) return &f;
  return nullptr;
}

const Json* ToolSet::parameters(std::string_view name) const {
  const Function* f = find(name);
  return f && !f->parameters.is_null() ? &f->parameters : nullptr;
}

ToolCallParser::ToolCallParser(std::shared_ptr<const ToolSet> tools, Options o)
    : tools_(std::move(tools)), o_(o) {}

ToolCallParser::~ToolCallParser() = default;

ToolParseResult ToolCallParser::push(std::string_view text) {
  buf_ += text;
  parse(false);
  return std::exchange(out_, {});
}

ToolParseResult ToolCallParser::flush() {
  parse(true);
  out_.content += std::exchange(held_spaces_, {});
  return std::exchange(out_, {});
}

void ToolCallParser::content(std::string_view text) {
  if (after_call_) {
    while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
    if (text.empty()) return;
    after_call_ = false;
  }
  size_t body = text.size();
  while (body > 0 && is_space(text[body - 1])) --body;
  if (body == 0) {
    held_spaces_ += text;
    return;
  }
  out_.content += std::exchange(held_spaces_, {});
  out_.content += text.substr(0, body);
  held_spaces_ = std::string(text.substr(body));
}

void ToolCallParser::begin_call(const std::string& name) {
  held_spaces_.clear();
  call_open_ = true;
  call_kept_ = false;
  call_params_ = nullptr;
  if (!tools_->has(name)) {
    log_warn("tool call parser: dropped a call of '{}', which is not among the request's tools",
             name.substr(0, 100));  // model output: not logged at any length
    return;
  }
  if (!o_.parallel && calls_ > 0) return;  // parallel_tool_calls false: the first call only
  call_kept_ = true;
  call_params_ = tools_->parameters(name);
  out_.calls.push_back({calls_++, new_tool_call_id(), name, ""});
}

void ToolCallParser::arguments(std::string_view fragment) {
  if (!call_open_ || !call_kept_ || fragment.empty()) return;
  // A call's first delta keeps arguments "" (its start); fragments go into deltas of their own.
  const size_t index = calls_ - 1;
  if (out_.calls.empty() || out_.calls.back().index != index || !out_.calls.back().id.empty())
    out_.calls.emplace_back().index = index;
  out_.calls.back().arguments += fragment;
}

void ToolCallParser::end_call() {
  call_open_ = false;
  call_kept_ = false;
  call_params_ = nullptr;
  after_call_ = true;
}

bool is_tool_call_parser(std::string_view name) {
  return name == "glm" || name == "glm45" || name == "glm47" || name == "deepseekv3" ||
         name == "deepseekv31" || name == "deepseekv32";
}

const char* tool_call_parser_names() {
  return "glm45, glm47, deepseekv3, deepseekv31, deepseekv32";
}

std::unique_ptr<ToolCallParser> make_tool_call_parser(std::string_view name,
                                                      std::shared_ptr<const ToolSet> tools,
                                                      ToolCallParser::Options o) {
  if (name == "glm" || name == "glm45" || name == "glm47")
    return make_glm_tool_parser(std::move(tools), o);
  if (name == "deepseekv3") return make_deepseek_tool_parser(true, std::move(tools), o);
  if (name == "deepseekv31") return make_deepseek_tool_parser(false, std::move(tools), o);
  if (name == "deepseekv32") return make_dsml_tool_parser(std::move(tools), o);
  return nullptr;
}

std::vector<std::string> tool_call_markers(std::string_view name) {
  auto list = [](const auto& markers) {
    return std::vector<std::string>(std::begin(markers), std::end(markers));
  };
  if (name == "glm" || name == "glm45" || name == "glm47") return list(kGlmMarkers);
  if (name == "deepseekv3" || name == "deepseekv31") return list(kDeepSeekMarkers);
  if (name == "deepseekv32") return list(kDsmlMarkers);
  return {};
}

std::string new_tool_call_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("call_{:016x}{:08x}", rng(), static_cast<uint32_t>(rng()));
}

}  // namespace tandem::server
