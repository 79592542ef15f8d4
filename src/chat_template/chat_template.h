// Chat templates: renders a Hugging Face chat_template (tokenizer_config.json "chat_template"
// or chat_template.jinja) the way transformers' apply_chat_template does. Its Jinja2 environment
// is an ImmutableSandboxedEnvironment with trim_blocks=True, lstrip_blocks=True,
// keep_trailing_newline=False, the loopcontrols extension, tojson = json.dumps with
// ensure_ascii=False, and the raise_exception() and strftime_now() globals. The interpreter
// is our own Jinja2 subset (see docs/chat-templates.md for what it covers).
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>

namespace tandem {

namespace jinja {
struct Template;
}

// The deepest nesting render() converts from its context: a JSON value inside N arrays/objects
// is at depth N, and an array or object at this depth or deeper is a render error ("JSON value
// nested deeper than 128 levels"), so the conversion's recursion (and the converted value's
// recursive destruction and printing) stays shallow for any caller. The server refuses request
// bodies nested deeper than the same number while parsing (server/json_limits.h).
inline constexpr int kChatTemplateMaxJsonDepth = 128;

class ChatTemplate {
 public:
  // Parses once; a syntax error throws tandem::Error with line:column and what was expected.
  explicit ChatTemplate(std::string source);

  // context: {"messages": [...], "tools": [...] (optional), "add_generation_prompt": bool,
  //           "bos_token": "...", "eos_token": "...", plus any chat_template_kwargs such as
  //           enable_thinking}. transformers passes tools=None and documents=None when absent;
  //           callers that want identical output for `tools is defined` should do the same.
  // Throws tandem::InvalidArgument on a render error: raise_exception('...') carries the
  // template's message verbatim, other errors say "chat template error at line N: ...".
  // Thread-safe: const, and a render shares nothing mutable with other renders.
  std::string render(const nlohmann::ordered_json& context) const;

  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::shared_ptr<const jinja::Template> tpl_;
};

struct ModelChatTemplate {
  std::string source;
  std::string bos_token, eos_token;
};

// Loads the template from a model folder: chat_template.jinja if present, else
// tokenizer_config.json's "chat_template" (a string, or the list-of-{name, template} form, from
// which "default" is taken), else chat_template.json. bos/eos come from tokenizer_config.json
// (plain strings or {"content": ...} added-token objects; empty when absent). Returns nullopt
// when the folder has no template; throws tandem::Error on malformed files.
std::optional<ModelChatTemplate> load_chat_template(const std::string& model_dir);

}  // namespace tandem
