// Fuzzes request bodies the way the routes read them, without a model: parse_json_object, then
// the OpenAI chat and completion parsers and SGLang's /generate parser, and for a valid chat
// request the template context rendered with the default model's chat template. Bad input must
// be an ApiError (a 4xx naming the field) or, from the template, a tandem::Error (a 400); any
// other exception would reach the router as a 500, so it is a finding here.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "chat_template/chat_template.h"
#include "core/error.h"
#include "server/json_fields.h"
#include "server/openai_protocol.h"
#include "server/sglang_protocol.h"

namespace {

struct Template {
  tandem::ChatTemplate tpl;
  tandem::ModelChatTemplate model;
};

const Template& default_template() {
  static const Template* t = [] {
    const auto m = tandem::load_chat_template(TANDEM_SOURCE_DIR "/models/tandem-austen");
    if (!m) std::abort();  // the default model ships a template; without it nothing is tested
    return new Template{tandem::ChatTemplate(m->source), *m};
  }();
  return *t;
}

void chat(const tandem::server::Json& body) {
  using namespace tandem::server;
  const ChatRequest req = parse_chat_request(body);
  const Template& t = default_template();
  (void)template_handles_content_parts(t.tpl.source());
  (void)t.tpl.render(chat_template_context(req, t.tpl, t.model.bos_token, t.model.eos_token));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)default_template();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tandem::server;
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::optional<Json> body;
  try {
    body = parse_json_object(text);
  } catch (const ApiError&) {
    return 0;
  }
  (void)quote_json(*body);
  (void)dump_json(*body);
  try {
    chat(*body);
  } catch (const ApiError&) {
  } catch (const tandem::Error&) {
  }
  try {
    (void)parse_completion_request(*body);
  } catch (const ApiError&) {
  }
  try {
    (void)parse_generate_request(*body);
  } catch (const ApiError&) {
  }
  return 0;
}
