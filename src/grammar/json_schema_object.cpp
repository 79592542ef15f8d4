// Objects: properties in schema order, any optional subset of them, then (if
// additionalProperties allows) extra members under names the schema does not define.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "grammar/json_schema_internal.h"
#include "grammar/regex_internal.h"

namespace tandem::grammar::front {

Expr SchemaConverter::object(const Json& schema, const std::string& path) {
  const Json props = schema.value("properties", Json::object());
  if (!props.is_object()) refuse("properties", path, "must be an object");
  std::vector<std::string> required;
  if (schema.contains("required")) {
    const Json& r = schema["required"];
    if (!r.is_array()) refuse("required", path, "must be an array of property names");
    for (const Json& name : r) {
      if (!name.is_string()) refuse("required", path, "must be an array of property names");
      required.push_back(name.get<std::string>());
    }
  }
  // Extra members: none unless additionalProperties says otherwise (the policy OpenAI's strict
  // mode and xgrammar follow; JSON Schema itself would allow any).
  std::optional<Expr> extra_value;
  if (schema.contains("additionalProperties")) {
    const Json& ap = schema["additionalProperties"];
    if (opt_.strict && ap != Json(false)) {
      refuse("additionalProperties", path, "must be false in strict mode");
    }
    if (ap.is_boolean()) {
      if (ap.get<bool>()) extra_value = any_value();
    } else {
      extra_value = value(ap, pointer_append(path, "additionalProperties"));
    }
  }

  std::vector<std::string> names;
  std::vector<Expr> kvs;
  std::vector<bool> is_required;
  auto add_member = [&](const std::string& name, const Expr& v, bool req) {
    kvs.push_back(seq({literal(Json(name).dump()), ws(), literal(":"), ws(), v}));
    is_required.push_back(req);
  };
  const std::string props_path = pointer_append(path, "properties");
  for (const auto& [name, sub] : props.items()) {
    names.push_back(name);
    const bool req =
        opt_.strict || std::find(required.begin(), required.end(), name) != required.end();
    if (sub == Json(false)) {
      // The property may not appear at all.
      if (req)
        refuse("required", path, fmt::format("\"{}\" is required but its schema is false", name));
      continue;
    }
    add_member(name, value(sub, pointer_append(props_path, name)), req);
  }
  for (const std::string& name : required) {
    if (props.contains(name)) continue;
    // Required but not in properties: it can only come as an extra member.
    if (!extra_value) {
      refuse("required", path,
             fmt::format("\"{}\" is required but not in properties, and additionalProperties "
                         "{}",
                         name,
                         schema.contains("additionalProperties") ? "is false"
                                                                 : "is absent (treated as false)"));
    }
    names.push_back(name);
    add_member(name, *extra_value, true);
  }

  std::optional<Expr> extra;
  if (extra_value) {
    const Expr key = names.empty() ? any_string() : object_key_not_in(names);
    extra = seq({key, ws(), literal(":"), ws(), *extra_value});
  }
  return members_with_optional(kvs, is_required, extra);
}

// "{" members "}" where member i may be left out unless required[i] and `extra` may follow any
// number of times. With R(k) = the members from k on, after at least one was written:
//   R(k) = ("," kv_k)[?] R(k+1),   R(n) = ("," extra)*
// and the list as a whole starts at its first present member:
//   S(i) = kv_i R(i+1) | S(i+1) while i is optional,  S(first required) = kv_i R(i+1).
// Each R(k) that more than one place uses is a rule, so the size stays linear in the number of
// properties, with commas right for every subset.
Expr SchemaConverter::members_with_optional(const std::vector<Expr>& kvs,
                                            const std::vector<bool>& required,
                                            const std::optional<Expr>& extra) {
  const size_t n = kvs.size();
  const int id = ++object_count_;
  const Expr sep = seq({ws(), literal(","), ws()});
  const Expr tail = extra ? star(seq({sep, *extra})) : empty_expr();
  const size_t first_required =
      std::find(required.begin(), required.end(), true) - required.begin();

  auto piece = [&](size_t k) {
    const Expr p = seq({sep, kvs[k]});
    return required[k] ? p : optional(p);
  };
  auto inline_rest = [&](size_t k) {
    std::vector<Expr> parts;
    for (size_t j = k; j < n; ++j) parts.push_back(piece(j));
    parts.push_back(tail);
    return seq(parts);
  };
  // R(k) for k <= first_required + 1 is shared by S(k-1) and R(k-1): a rule each.
  std::map<size_t, Expr> rest_rules;
  const size_t shared_limit = std::min(first_required + 1, n);
  std::function<Expr(size_t)> rest = [&](size_t k) -> Expr {
    if (k >= shared_limit) return inline_rest(k);
    auto it = rest_rules.find(k);
    if (it != rest_rules.end()) return it->second;
    const Expr body = seq({piece(k), rest(k + 1)});
    const Expr ref = rule_ref(rules_.add(fmt::format("obj{}-rest{}", id, k), body));
    rest_rules.emplace(k, ref);
    return ref;
  };

  // S(i), or nullopt when nothing can start at i.
  std::function<std::optional<Expr>(size_t)> start = [&](size_t i) -> std::optional<Expr> {
    if (i == n) {
      if (!extra) return std::nullopt;
      return seq({*extra, tail});
    }
    const Expr here = seq({kvs[i], rest(i + 1)});
    if (required[i]) return here;
    std::optional<Expr> later = start(i + 1);
    return later ? alt({here, *later}) : here;
  };

  const std::optional<Expr> members = start(0);
  if (!members) return seq({literal("{"), ws(), literal("}")});
  if (first_required < n) return seq({literal("{"), ws(), *members, ws(), literal("}")});
  return seq({literal("{"), ws(), optional(seq({*members, ws()})), literal("}")});
}

// A JSON string (with its quotes) whose value is none of `names`. Extra names are written in
// one canonical spelling per character (raw, or the one escape JSON requires), so that an
// escape cannot smuggle in a defined name ("\u0061" for "a"). A trie over the names: at each
// node the key may end (unless a name ends there), continue with a character no name continues
// with (then anything may follow), or follow a name's next character.
Expr SchemaConverter::object_key_not_in(const std::vector<std::string>& names) {
  struct Node {
    std::map<char32_t, int> kids;
    bool terminal = false;
  };
  std::vector<Node> trie(1);
  for (const std::string& name : names) {
    int at = 0;
    for (size_t pos = 0; pos < name.size();) {
      const char32_t c = next_code_point(name, pos);
      auto it = trie[at].kids.find(c);
      if (it == trie[at].kids.end()) {
        trie.push_back({});
        it = trie[at].kids.emplace(c, static_cast<int>(trie.size()) - 1).first;
      }
      at = it->second;
    }
    trie[at].terminal = true;
  }
  const Expr any_rest = rule_ref(
      rules_.add("key-rest", seq({star(json_string_chars(CodePointSet::all())), literal("\"")})));
  const int id = object_count_;
  std::function<Expr(int)> node = [&](int at) -> Expr {
    std::vector<Expr> options;
    if (!trie[at].terminal) options.push_back(literal("\""));
    CodePointSet others = CodePointSet::all();
    for (const auto& [c, kid] : trie[at].kids) others = others.minus(CodePointSet::single(c));
    if (!others.empty()) options.push_back(seq({json_string_chars(others), any_rest}));
    for (const auto& [c, kid] : trie[at].kids) {
      options.push_back(seq({literal(json_escape(c)), node(kid)}));
    }
    return rule_ref(rules_.add(fmt::format("obj{}-key{}", id, at), alt(options)));
  };
  return seq({literal("\""), node(0)});
}

}  // namespace tandem::grammar::front
