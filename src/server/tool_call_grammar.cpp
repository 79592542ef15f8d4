#include "server/tool_call_grammar.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "grammar/regex.h"

#include "grammar/regex.h"

namespace tandem::server {

namespace {

using grammar::EbnfRules;
using grammar::GrammarError;

// An EBNF string literal of s (UTF-8 passes through; quotes, backslashes and controls escaped).
std::string lit(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20) {
      out += fmt::format("\\x{:02X}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// One function as the grammar needs it: its name and the parameters' schema.
struct Function {
  std::string name;
  nlohmann::ordered_json parameters;  // an object schema ({} when absent)
};

std::vector<Function> functions_of(const Json& tools, const std::string& only) {
  std::vector<Function> out;
  if (!tools.is_array()) return out;
  for (const Json& t : tools) {
    const Json& fn = t.contains("function") ? t["function"] : t;
    if (!fn.is_object() || !fn.contains("name") || !fn["name"].is_string()) continue;
    Function f{fn["name"].get<std::string>(), nlohmann::ordered_json::object()};
    if (!only.empty() && f.name != only) continue;
    if (fn.contains("parameters") && fn["parameters"].is_object()) f.parameters = fn["parameters"];
    out.push_back(std::move(f));
  }
  return out;
}

// Formats whose arguments come one value at a time (GLM's arg_key/arg_value pairs, DSML's
// parameters): each property in the schema's order, required ones always, optional ones maybe;
// a string property's value is raw text without '<' (the tags start with it), any other a JSON
// value of its schema.
struct PairFormat {
  // text around one argument: before + key + middle + value + after; string properties may use
  // their own middle (DSML says string="true"/"false").
  std::string before, middle_string, middle_json, after;
};

// Arguments the template writes as raw text (and the parser keeps as strings): type string, or no
// type and only string enum / const values.
bool raw_text(const nlohmann::ordered_json& s) {
  if (!s.is_object()) return false;
  if (s.contains("type")) return s["type"] == "string";
  auto all_strings = [](const nlohmann::ordered_json& v) {
    if (v.is_string()) return true;
    if (!v.is_array() || v.empty()) return false;
    for (const auto& e : v)
      if (!e.is_string()) return false;
    return true;
  };
  return (s.contains("enum") && all_strings(s["enum"])) ||
         (s.contains("const") && s["const"].is_string());
}

// A string argument as raw text: its enum or const values, its pattern, or text without '<'
// within its length bounds.
std::string string_value(const nlohmann::ordered_json& s) {
  if (s.contains("enum") && s["enum"].is_array()) {
    std::string alt;
    for (const auto& e : s["enum"])
      if (e.is_string()) alt += (alt.empty() ? "" : " | ") + lit(e.get<std::string>());
    if (!alt.empty()) return "(" + alt + ")";
  }
  if (s.contains("const") && s["const"].is_string()) return lit(s["const"].get<std::string>());
  if (s.contains("pattern") && s["pattern"].is_string())
    return "(" + grammar::regex_to_ebnf_expression(s["pattern"].get<std::string>()) + ")";
  const int64_t lo = s.value("minLength", int64_t{0}), hi = s.value("maxLength", int64_t{-1});
  if (lo == 0 && hi < 0) return "[^<]*";
  return hi < 0 ? fmt::format("[^<]{{{},}}", lo) : fmt::format("[^<]{{{},{}}}", lo, hi);
}

std::string pair_arguments(const Function& f, const PairFormat& pf, const std::string& prefix,
                           const grammar::JsonGrammarOptions& opt, std::string& rules) {
  const auto& params = f.parameters;
  if (!params.contains("properties") || !params["properties"].is_object() ||
      params["properties"].empty())
    return "";
  std::vector<std::string> required;
  if (params.contains("required") && params["required"].is_array())
    for (const auto& r : params["required"])
      if (r.is_string()) required.push_back(r.get<std::string>());
  std::string seq;
  int i = 0;
  for (const auto& [key, schema] : params["properties"].items()) {
    const bool is_string = raw_text(schema);
    std::string value;
    if (is_string) {
      // The front end still reads the schema, so that a keyword it cannot honour is refused
      // (400 naming it) rather than ignored.
      grammar::json_schema_rules(schema, fmt::format("{}check{}-", prefix, i), opt);
      value = string_value(schema);
    } else {
      const EbnfRules r = grammar::json_schema_rules(schema, fmt::format("{}a{}-", prefix, i), opt);
      rules += r.text;
      value = r.root;
    }
    const std::string one = lit(pf.before + key + (is_string ? pf.middle_string : pf.middle_json)) +
                            " " + value + " " + lit(pf.after);
    const bool req = std::find(required.begin(), required.end(), key) != required.end();
    seq += (seq.empty() ? "" : " ") + (req ? "(" + one + ")" : "(" + one + ")?");
    ++i;
  }
  return seq;
}

}  // namespace

EbnfRules tool_call_rules(const std::string& parser, const Json& tools, const std::string& function,
                          bool parallel, const grammar::JsonGrammarOptions& opt) {
  const std::vector<Function> fns = functions_of(tools, function);
  if (fns.empty())
    throw GrammarError(function.empty() ? "no function to call" : "no tool named " + function,
                       "tool_choice");
  std::string rules;
  std::vector<std::string> calls;
  for (size_t i = 0; i < fns.size(); ++i) {
    const Function& f = fns[i];
    const std::string prefix = fmt::format("tool-f{}-", i);
    std::string call;
    if (parser == "glm47" || parser == "glm45" || parser == "glm") {
      const bool nl = parser != "glm47";  // GLM-4.5/4.6 put a newline after the name and pairs
      const PairFormat pf{"<arg_key>", "</arg_key>" + std::string(nl ? "\n" : "") + "<arg_value>",
                          "</arg_key>" + std::string(nl ? "\n" : "") + "<arg_value>",
                          "</arg_value>" + std::string(nl ? "\n" : "")};
      const std::string args = pair_arguments(f, pf, prefix, opt, rules);
      call = lit("<tool_call>" + f.name + (nl ? "\n" : "")) + (args.empty() ? "" : " " + args) +
             " " + lit("</tool_call>");
    } else if (parser == "deepseekv3" || parser == "deepseekv31") {
      const EbnfRules r = grammar::json_schema_rules(f.parameters, prefix + "args-", opt);
      rules += r.text;
      call = parser == "deepseekv3"
                 ? lit("<｜tool▁call▁begin｜>function<｜tool▁sep｜>" + f.name + "\n```json\n") +
                       " " + r.root + " " + lit("\n```<｜tool▁call▁end｜>")
                 : lit("<｜tool▁call▁begin｜>" + f.name + "<｜tool▁sep｜>") + " " + r.root + " " +
                       lit("<｜tool▁call▁end｜>");
    } else if (parser == "deepseekv32") {
      const PairFormat pf{"<｜DSML｜parameter name=\"", "\" string=\"true\">",
                          "\" string=\"false\">", "</｜DSML｜parameter>\n"};
      const std::string args = pair_arguments(f, pf, prefix, opt, rules);
      call = lit("<｜DSML｜invoke name=\"" + f.name + "\">\n") + (args.empty() ? "" : " " + args) +
             " " + lit("</｜DSML｜invoke>\n");
    } else {
      throw GrammarError(fmt::format("tool_choice \"required\" or a named function needs a "
                                     "--tool-call-parser with a call format, got '{}'",
                                     parser),
                         "tool_choice");
    }
    rules += fmt::format("tool-call{} ::= {}\n", i, call);
    calls.push_back(fmt::format("tool-call{}", i));
  }
  std::string any = calls[0];
  for (size_t i = 1; i < calls.size(); ++i) any += " | " + calls[i];
  rules += "tool-any ::= " + any + "\n";
  // Several calls: GLM writes them one per line; DeepSeek-V3 and V3.1 inside one calls block.
  const std::string more = parallel ? " (\"\\n\"? tool-any)*" : "";
  if (parser == "deepseekv3" || parser == "deepseekv31")
    rules += "tool-root ::= " + lit("<｜tool▁calls▁begin｜>") + " tool-any" + more + " " +
             lit("<｜tool▁calls▁end｜>") + "\n";
  else if (parser == "deepseekv32")
    rules += "tool-root ::= " + lit("<｜DSML｜function_calls>\n") + " tool-any" +
             (parallel ? " tool-any*" : "") + " " + lit("</｜DSML｜function_calls>") + "\n";
  else
    rules += "tool-root ::= tool-any" + more + "\n";
  return {rules, "tool-root"};
}

}  // namespace tandem::server
