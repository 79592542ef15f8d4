#include "chat_template/chat_template.h"

#include <fmt/format.h>

#include "chat_template/ast.h"
#include "chat_template/errors.h"
#include "chat_template/globals.h"
#include "chat_template/parser.h"
#include "chat_template/renderer.h"
#include "core/error.h"

namespace tandem {

ChatTemplate::ChatTemplate(std::string source)
    : source_(std::move(source)), tpl_(jinja::parse_template(source_)) {}

std::string ChatTemplate::render(const nlohmann::ordered_json& context) const {
  if (!context.is_object()) throw InvalidArgument("chat template context must be a JSON object");
  try {
    // Render variables shadow the globals, as Jinja's render(**kwargs) does.
    auto vars = std::make_shared<jinja::Scope>(jinja::make_globals());
    for (auto it = context.begin(); it != context.end(); ++it) {
      vars->set(it.key(), jinja::from_json(it.value()));
    }
    const jinja::NamespacesOfThisRender namespaces;  // declared first: emptied after the render
    jinja::Interp interp(*tpl_, vars);
    return interp.render();
  } catch (const jinja::RenderError& e) {
    if (e.raised_by_template) throw InvalidArgument(e.message);
    if (e.line > 0) {
      throw InvalidArgument(fmt::format("chat template error at line {}: {}", e.line, e.message));
    }
    throw InvalidArgument("chat template error: " + e.message);
  }
}

}  // namespace tandem
