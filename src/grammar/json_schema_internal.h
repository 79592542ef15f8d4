// The JSON Schema converter's shared state. json_schema.cpp checks keywords and dispatches
// (types, enum/const, anyOf/oneOf); json_schema_compose.cpp resolves $ref and merges schemas;
// json_schema_{object,array,string,number}.cpp build each type's rules and
// json_schema_shared.cpp the rules all of them use.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "grammar/ebnf_writer.h"
#include "grammar/json_schema.h"

namespace tandem::grammar::front {

using Json = nlohmann::ordered_json;

// "#/properties/a~1b": where a schema sits in the root document (JSON Pointer), for messages
// and $ref.
std::string pointer_append(const std::string& path, const std::string& segment);

// A GrammarError for `keyword` at `path`; the message names both.
[[noreturn]] void refuse(const std::string& keyword, const std::string& path,
                         const std::string& why);

// Schemas nest, and $ref / allOf can loop; past this depth the schema is refused.
inline constexpr int kMaxSchemaDepth = 128;

// Keywords that describe a value without constraining it (and the $defs containers).
bool is_annotation(std::string_view key);
// `schema` without `key`.
Json without(const Json& schema, std::string_view key);
// The names in `schema`'s "type" (one or a list); GrammarError for anything else.
std::set<std::string> type_set(const Json& schema, const std::string& path);

// The value of minLength / maxLength / minItems / maxItems: a non-negative integer up to the
// largest repeat count the EBNF dialect takes.
inline constexpr int64_t kMaxCount = 10000;
int64_t count_keyword(const Json& schema, const char* key, const std::string& path);

// Refuses a `format` the string rules cannot express, whatever the type: JSON Schema applies
// format to strings only, but a format meant for another type (OpenAPI's int32) would
// otherwise pass as a constraint silently dropped.
void check_format(const Json& schema, const std::string& path);

class SchemaConverter {
 public:
  SchemaConverter(const Json& root, const std::string& prefix, const JsonGrammarOptions& opt);

  // The expression matching one value of `schema`, found at `path`.
  Expr value(const Json& schema, const std::string& path);
  // Rule text and the root rule's name.
  EbnfRules finish(const Expr& root_value);

  // Shared rules, defined on first use.
  Expr ws();  // empty when max_whitespace is 0
  Expr any_value();
  Expr any_string();
  Expr any_number();
  Expr any_integer();
  Expr unicode_escape();              // \uXXXX, any code point but a surrogate
  Expr string_unit(bool with_pairs);  // one string character; with_pairs: \uD83D\uDE00 too

 private:
  Expr value_of_types(const Json& schema, const std::string& path);
  Expr ref(const Json& schema, const std::string& path);
  Expr enum_or_const(const Json& schema, const std::string& path);
  Expr json_literal(const Json& v);
  const Json& resolve(const std::string& ref, const std::string& path, std::string& target_path);
  // One schema requiring both a and b (allOf, keywords next to $ref / anyOf / oneOf), where
  // their keywords can be combined exactly; GrammarError otherwise.
  Json merge(const Json& a, const Json& b, const std::string& path);
  // `schema` with its $ref (if any) replaced by the target's keywords, for merge().
  Json inline_refs_for_merge(const Json& schema, const std::string& path, int depth);

  Expr object(const Json& schema, const std::string& path);
  Expr array(const Json& schema, const std::string& path);
  Expr string(const Json& schema, const std::string& path);
  Expr number(const Json& schema, const std::string& path, bool integer);

  Expr object_key_not_in(const std::vector<std::string>& names);
  Expr members_with_optional(const std::vector<Expr>& kvs, const std::vector<bool>& required,
                             const std::optional<Expr>& extra);

  const Json& root_;
  JsonGrammarOptions opt_;
  RuleTable rules_;
  std::string root_rule_;
  std::map<std::string, std::string> ref_rules_;  // target pointer (or "<any>") -> rule name
  int depth_ = 0;
  int object_count_ = 0;
};

// Decimal numbers (integers, or decimals without an exponent) between two integer bounds, each
// optional and inclusive or exclusive: the digit-range construction json_schema_number.cpp
// documents.
struct IntBound {
  int64_t value;
  bool exclusive;
};
Expr decimal_range(std::optional<IntBound> lo, std::optional<IntBound> hi, bool integer);

}  // namespace tandem::grammar::front
