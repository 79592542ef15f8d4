// Fuzzes the chat-template engine end to end: the input is a template, then a NUL byte, then the
// render context as JSON (messages, tools, flags). Parsing either succeeds or throws
// tandem::Error with a position; rendering either returns text or throws tandem::Error. Without a
// NUL (or with a context that is not a JSON object) a fixed chat is rendered, so plain template
// text is a useful input too.
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "chat_template/chat_template.h"
#include "core/error.h"

namespace {

using Json = nlohmann::ordered_json;

// Deeper than render()'s own limit (kChatTemplateMaxJsonDepth), so that limit is exercised, but
// bounded so the harness's own JSON copies stay off the end of the stack.
constexpr int kMaxContextDepth = 2 * tandem::kChatTemplateMaxJsonDepth;

Json default_context() {
  return Json{{"messages",
               {{{"role", "system"}, {"content", "You are helpful."}},
                {{"role", "user"}, {"content", "Hi <think> there"}},
                {{"role", "assistant"}, {"content", "Hello!"}, {"reasoning_content", "greet"}},
                {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "parts"}}}}}}},
              {"tools", nullptr},
              {"add_generation_prompt", true},
              {"bos_token", "<s>"},
              {"eos_token", "</s>"}};
}

Json parse_context(std::string_view text) {
  struct TooDeep {};
  try {
    Json j = Json::parse(text, [](int depth, Json::parse_event_t e, Json&) {
      if ((e == Json::parse_event_t::object_start || e == Json::parse_event_t::array_start) &&
          depth >= kMaxContextDepth)
        throw TooDeep{};
      return true;
    });
    if (j.is_object()) return j;
  } catch (const TooDeep&) {
  } catch (const Json::exception&) {
  }
  return default_context();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string source(input.substr(0, nul));
  const Json context =
      nul == std::string_view::npos ? default_context() : parse_context(input.substr(nul + 1));
  try {
    const tandem::ChatTemplate tpl(source);
    (void)tpl.render(context);
  } catch (const tandem::Error&) {
  }
  return 0;
}
