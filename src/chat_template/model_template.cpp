// load_chat_template: finds a model folder's chat template the way transformers' tokenizer
// loading does.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "chat_template/chat_template.h"
#include "core/error.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) fail("cannot read {}", p.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Nesting is bounded while parsing, as for config.json and tokenizer.json: nothing recursive
// (copies, dumps) ever sees a deeper value.
nlohmann::ordered_json read_json(const fs::path& p) {
  using Json = nlohmann::ordered_json;
  struct TooDeep {};
  try {
    return Json::parse(read_file(p), [](int depth, Json::parse_event_t e, Json&) {
      if ((e == Json::parse_event_t::object_start || e == Json::parse_event_t::array_start) &&
          depth >= kChatTemplateMaxJsonDepth)
        throw TooDeep{};
      return true;
    });
  } catch (const TooDeep&) {
    fail("{}: JSON nested deeper than {} levels", p.string(), kChatTemplateMaxJsonDepth);
  } catch (const nlohmann::json::exception& e) {
    fail("{} is not valid JSON: {}", p.string(), e.what());
  }
}

// A special token is a plain string or an AddedToken object {"content": "...", ...}.
std::string token_text(const nlohmann::ordered_json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  fail("tokenizer_config.json: {} is neither a string nor an added-token object", key);
}

// "chat_template" is a string or a list of {"name", "template"}; transformers uses "default".
std::optional<std::string> template_field(const nlohmann::ordered_json& j,
                                          const std::string& file) {
  auto it = j.find("chat_template");
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    std::string names;
    for (const auto& entry : *it) {
      if (!entry.is_object() || !entry.contains("name") || !entry.contains("template")) {
        fail("{}: chat_template list entries need \"name\" and \"template\"", file);
      }
      std::string name = entry["name"].get<std::string>();
      if (name == "default") return entry["template"].get<std::string>();
      names += (names.empty() ? "" : ", ") + name;
    }
    fail("{}: chat_template has several templates ({}) and none named \"default\"", file, names);
  }
  fail("{}: chat_template must be a string or a list of named templates", file);
}

}  // namespace

std::optional<ModelChatTemplate> load_chat_template(const std::string& model_dir) {
  fs::path dir(model_dir);
  ModelChatTemplate out;
  std::optional<nlohmann::ordered_json> config;
  if (fs::exists(dir / "tokenizer_config.json")) {
    config = read_json(dir / "tokenizer_config.json");
    out.bos_token = token_text(*config, "bos_token");
    out.eos_token = token_text(*config, "eos_token");
  }
  if (fs::exists(dir / "chat_template.jinja")) {
    out.source = read_file(dir / "chat_template.jinja");
    return out;
  }
  if (config) {
    if (auto t = template_field(*config, "tokenizer_config.json")) {
      out.source = *t;
      return out;
    }
  }
  if (fs::exists(dir / "chat_template.json")) {
    if (auto t = template_field(read_json(dir / "chat_template.json"), "chat_template.json")) {
      out.source = *t;
      return out;
    }
  }
  return std::nullopt;
}

}  // namespace tandem
