#include "tokenizer/post_processor.h"

#include <map>

namespace tandem::tok {
namespace {

// One item of a template: a run of special-token ids, or the input sequence itself.
struct TemplateItem {
  bool is_sequence = false;
  std::vector<int32_t> ids;
};

class Template : public PostProcessor {
 public:
  explicit Template(std::vector<TemplateItem> items) : items_(std::move(items)) {}
  std::vector<int32_t> process(std::vector<int32_t> ids) const override {
    std::vector<int32_t> out;
    out.reserve(ids.size() + 4);
    for (const TemplateItem& item : items_) {
      if (item.is_sequence) {
        out.insert(out.end(), ids.begin(), ids.end());
      } else {
        out.insert(out.end(), item.ids.begin(), item.ids.end());
      }
    }
    return out;
  }

 private:
  std::vector<TemplateItem> items_;
};

class Sequence : public PostProcessor {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PostProcessor>> parts) : parts_(std::move(parts)) {}
  std::vector<int32_t> process(std::vector<int32_t> ids) const override {
    for (const auto& p : parts_) ids = p->process(std::move(ids));
    return ids;
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> parts_;
};

std::unique_ptr<PostProcessor> parse_template(const Json& j, const std::string& path) {
  // special_tokens: name -> {"id": name, "ids": [...], "tokens": [...]}
  std::map<std::string, std::vector<int32_t>> specials;
  if (const Json* sp = json_optional(j, "special_tokens")) {
    const std::string sp_path = json_path(path, "special_tokens");
    if (!sp->is_object()) json_fail(sp_path, "expected an object");
    for (auto it = sp->begin(); it != sp->end(); ++it) {
      const std::string p = json_path(sp_path, it.key());
      const Json& ids = json_array(it.value(), p, "ids");
      std::vector<int32_t> v;
      for (size_t i = 0; i < ids.size(); ++i) {
        if (!ids[i].is_number_integer())
          json_fail(json_path(json_path(p, "ids"), i), "expected an id");
        v.push_back(ids[i].get<int32_t>());
      }
      specials[it.key()] = std::move(v);
    }
  }
  // Only the single-sequence template is used: encode() takes one text. "pair" may be anything.
  const std::string single_path = json_path(path, "single");
  const Json& single = json_array(j, path, "single");
  std::vector<TemplateItem> items;
  for (size_t i = 0; i < single.size(); ++i) {
    const Json& piece = single[i];
    const std::string p = json_path(single_path, i);
    if (const Json* s = json_optional(piece, "SpecialToken")) {
      const std::string name = json_string(*s, json_path(p, "SpecialToken"), "id");
      auto it = specials.find(name);
      if (it == specials.end()) {
        json_fail(json_path(json_path(p, "SpecialToken"), "id"),
                  "'" + name + "' is not listed in special_tokens");
      }
      items.push_back({false, it->second});
    } else if (const Json* s = json_optional(piece, "Sequence")) {
      const std::string id = json_string(*s, json_path(p, "Sequence"), "id");
      if (id != "A") json_fail(json_path(json_path(p, "Sequence"), "id"), "single uses only $A");
      items.push_back({true, {}});
    } else {
      json_fail(p, "expected {\"SpecialToken\": ...} or {\"Sequence\": ...}");
    }
  }
  return std::make_unique<Template>(std::move(items));
}

// BertProcessing/RobertaProcessing: [cls] $A [sep], given as ["token", id] pairs.
std::unique_ptr<PostProcessor> parse_cls_sep(const Json& j, const std::string& path) {
  auto id_of = [&](const char* key) {
    const Json& v = json_required(j, path, key);
    if (!v.is_array() || v.size() != 2 || !v[1].is_number_integer()) {
      json_fail(json_path(path, key), "expected [\"token\", id]");
    }
    return v[1].get<int32_t>();
  };
  std::vector<TemplateItem> items{{false, {id_of("cls")}}, {true, {}}, {false, {id_of("sep")}}};
  return std::make_unique<Template>(std::move(items));
}

}  // namespace

std::unique_ptr<PostProcessor> parse_post_processor(const Json& j, const std::string& path) {
  if (j.is_null()) return nullptr;
  const std::string type = json_type(j, path);
  if (type == "ByteLevel") return nullptr;
  if (type == "TemplateProcessing") return parse_template(j, path);
  if (type == "BertProcessing" || type == "RobertaProcessing") return parse_cls_sep(j, path);
  if (type == "Sequence") {
    const std::string list_path = json_path(path, "processors");
    const Json& list = json_array(j, path, "processors");
    std::vector<std::unique_ptr<PostProcessor>> parts;
    for (size_t i = 0; i < list.size(); ++i) {
      auto p = parse_post_processor(list[i], json_path(list_path, i));
      if (p) parts.push_back(std::move(p));
    }
    if (parts.empty()) return nullptr;
    return std::make_unique<Sequence>(std::move(parts));
  }
  json_fail(json_path(path, "type"), "unsupported post-processor '" + type + "'");
}

}  // namespace tandem::tok
