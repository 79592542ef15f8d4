// Tool calls parsed back from what the real chat templates write: an assistant turn with
// reasoning, text and two calls (typed arguments, one call without any) is rendered through
// GLM-4.5's, GLM-4.7-Flash's, DeepSeek-V3's / V3.1's / V3.2's tool templates and the default
// model's (tests/data/templates, models/tandem-austen); the text after the prompt is the model's
// output, which the reasoning parser and the format's tool-call parser must turn back into the
// same reasoning, content and calls, whole, cut at every byte, and byte by byte.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "chat_template/chat_template.h"
#include "server/text_scan.h"
#include "tool_parse_util.h"

namespace tandem::server {
namespace {

std::string read_source(const std::string& rel) {
  std::ifstream in(std::string(TANDEM_SOURCE_DIR) + "/" + rel, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const Json kWeatherArgs = Json::parse(R"({"city": "Paris", "zip": "75001", "days": 3,
  "metric": true, "fields": ["temp", "rain"], "options": {"lang": "fr", "max": 2.5},
  "note": "multi\nline \"quoted\" <b>bold</b> é 风 🙂"})");

Json tools_json() {
  return Json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city.",
     "parameters": {"type": "object", "properties": {
       "city": {"type": "string"}, "zip": {"type": "string"}, "days": {"type": "integer"},
       "metric": {"type": "boolean"}, "fields": {"type": "array", "items": {"type": "string"}},
       "options": {"type": "object"}, "note": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "get_time", "description": "UTC time.",
     "parameters": {"type": "object", "properties": {}}}}])");
}

Json conversation(bool with_assistant) {
  Json messages = Json::array({{{"role", "user"}, {"content", "Weather in Paris?"}}});
  if (with_assistant)
    messages.push_back({{"role", "assistant"},
                        {"reasoning_content", "I should call get_weather."},
                        {"content", "Let me check."},
                        {"tool_calls",
                         {{{"id", "call_1"},
                           {"type", "function"},
                           {"function", {{"name", "get_weather"}, {"arguments", kWeatherArgs}}}},
                          {{"id", "call_2"},
                           {"type", "function"},
                           {"function", {{"name", "get_time"}, {"arguments", Json::object()}}}}}}});
  return messages;
}

struct TemplateCase {
  const char* name;
  const char* file;
  const char* parser;
  const char* bos;
  const char* eos;
  const char* header;  // the assistant turn's role marker, before the model's output
  bool reasoning;      // the template renders the turn's reasoning
  bool prompt_opens;   // the generation prompt opens a think block (output starts inside)
};

// The text the template writes after the prompt for the assistant turn, minus its role marker
// and end-of-sentence token: what the model would have produced.
std::string model_output(const TemplateCase& tc) {
  ChatTemplate tpl(read_source(tc.file));
  auto render = [&](bool with_assistant) {
    Json ctx = {
        {"messages", conversation(with_assistant)}, {"tools", tools_json()}, {"documents", nullptr},
        {"add_generation_prompt", false},           {"bos_token", tc.bos},   {"eos_token", tc.eos}};
    return tpl.render(ctx);
  };
  // Templates may end a render with whitespace of their own (DeepSeek-V3's).
  std::string prompt = render(false);
  const std::string full = render(true);
  while (!prompt.empty() && is_space(prompt.back())) prompt.pop_back();
  EXPECT_EQ(full.compare(0, prompt.size(), prompt), 0) << tc.name;
  std::string out = full.substr(prompt.size());
  if (*tc.header) skip_spaces(out);  // template indentation before the role marker
  EXPECT_EQ(out.compare(0, std::string(tc.header).size(), tc.header), 0) << tc.name << ": " << out;
  out.erase(0, std::string(tc.header).size());
  const std::string eos = tc.eos;
  while (!out.empty() && is_space(out.back())) out.pop_back();
  if (!eos.empty() && out.ends_with(eos)) out.erase(out.size() - eos.size());
  return out;
}

class ToolCallTemplates : public ::testing::TestWithParam<TemplateCase> {};

TEST_P(ToolCallTemplates, RoundTrip) {
  const TemplateCase& tc = GetParam();
  const std::string out = model_output(tc);
  SCOPED_TRACE(std::string(tc.name) + " output: " + out);
  auto tools = std::make_shared<const ToolSet>(tools_json());
  ReasoningParser::Options ro;
  ro.in_reasoning = tc.prompt_opens;
  ro.tool_start = std::string(tc.parser).starts_with("glm") ? "<tool_call>" : "";
  const Parsed p = parse_at_every_cut(tc.parser, tools, out, ro);
  EXPECT_EQ(p.reasoning, tc.reasoning ? "I should call get_weather." : "");
  // Whitespace around the text comes from template indentation (DeepSeek-V3's, V3.1's) or the
  // newline after </think> (GLM-4.5's); the parser passes leading whitespace on.
  EXPECT_EQ(trim(p.content), "Let me check.");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(Json::parse(p.calls[0].arguments), kWeatherArgs) << p.calls[0].arguments;
  EXPECT_EQ(p.calls[1].name, "get_time");
  EXPECT_EQ(Json::parse(p.calls[1].arguments), Json::object()) << p.calls[1].arguments;
}

std::string case_name(const ::testing::TestParamInfo<TemplateCase>& info) {
  return info.param.name;
}

const char* kDsBos = "<｜begin▁of▁sentence｜>";
const char* kDsEos = "<｜end▁of▁sentence｜>";

INSTANTIATE_TEST_SUITE_P(
    RealTemplates, ToolCallTemplates,
    ::testing::Values(TemplateCase{"Glm45", "tests/data/templates/glm-4.5.jinja", "glm45", "",
                                   "<|endoftext|>", "<|assistant|>", true, false},
                      TemplateCase{"Glm47Flash", "tests/data/templates/glm-4.7-flash.jinja",
                                   "glm47", "", "<|endoftext|>", "<|assistant|>", true, true},
                      TemplateCase{"TandemAusten", "models/tandem-austen/chat_template.jinja",
                                   "glm47", "", "<|endoftext|>", "<|assistant|>", false, false},
                      TemplateCase{"DeepSeekV3", "tests/data/templates/deepseek-v3.jinja",
                                   "deepseekv3", kDsBos, kDsEos, "", false, false},
                      TemplateCase{"DeepSeekV31", "tests/data/templates/deepseek-v3.1.jinja",
                                   "deepseekv31", kDsBos, kDsEos, "<｜Assistant｜></think>", false,
                                   false},
                      TemplateCase{"DeepSeekV32", "tests/data/templates/deepseek-v3.2.jinja",
                                   "deepseekv32", kDsBos, kDsEos, "", true, true}),
    case_name);

}  // namespace
}  // namespace tandem::server
