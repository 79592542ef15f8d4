// Arrays: prefixItems (or draft 4's array-form items) position by position, then `items` for
// the rest, with the length between minItems and maxItems.
#include <fmt/format.h>

#include "grammar/json_schema_internal.h"

namespace tandem::grammar::front {

Expr SchemaConverter::array(const Json& schema, const std::string& path) {
  if (schema.contains("uniqueItems") && schema["uniqueItems"] != Json(false)) {
    refuse("uniqueItems", path, "a grammar cannot compare items with each other");
  }
  Json prefix = Json::array();
  std::string prefix_key = "prefixItems";
  const Json* items = schema.contains("items") ? &schema["items"] : nullptr;
  std::string items_key = "items";
  if (schema.contains("prefixItems")) {
    prefix = schema["prefixItems"];
    if (!prefix.is_array()) refuse("prefixItems", path, "must be an array of schemas");
  }
  if (items && items->is_array()) {
    // Drafts 4 to 2019-09: array-form items is a tuple, additionalItems the rest.
    if (schema.contains("prefixItems")) {
      refuse("items", path, "array-form items together with prefixItems is not supported");
    }
    prefix = *items;
    prefix_key = "items";
    items = schema.contains("additionalItems") ? &schema["additionalItems"] : nullptr;
    items_key = "additionalItems";
  } else if (schema.contains("additionalItems")) {
    refuse("additionalItems", path, "is supported only after array-form items");
  }

  // After prefixItems, items absent means no more items (the same policy as
  // additionalProperties); with no prefixItems it means any items.
  std::optional<Expr> item;
  if (items == nullptr) {
    if (prefix.empty()) item = any_value();
  } else if (items->is_boolean()) {
    if (items->get<bool>()) item = any_value();
  } else {
    item = value(*items, pointer_append(path, items_key));
  }

  const int64_t min_items =
      schema.contains("minItems") ? count_keyword(schema, "minItems", path) : 0;
  int64_t max_items =
      schema.contains("maxItems") ? count_keyword(schema, "maxItems", path) : kUnbounded;
  const int64_t k = static_cast<int64_t>(prefix.size());
  if (!item && (max_items == kUnbounded || max_items > k)) max_items = k;
  if (max_items != kUnbounded && min_items > max_items) {
    refuse("minItems", path,
           fmt::format("{} items are required but at most {} are allowed", min_items, max_items));
  }
  const Expr sep = seq({ws(), literal(","), ws()});
  const Expr open = seq({literal("["), ws()}), close = literal("]");
  const int64_t positions = max_items == kUnbounded ? k : std::min(k, max_items);

  if (positions == 0) {
    if (!item || max_items == 0) return seq({open, close});
    const int64_t more_hi = max_items == kUnbounded ? kUnbounded : max_items - 1;
    if (min_items == 0) {
      return seq(
          {open, optional(seq({*item, repeat(seq({sep, *item}), 0, more_hi), ws()})), close});
    }
    return seq({open, *item, repeat(seq({sep, *item}), min_items - 1, more_hi), ws(), close});
  }

  // Built from the end: after the prefix the tail of `items`, and every prefix position past
  // minItems optional (with all the ones after it).
  Expr inner = empty_expr();
  if (item) {
    const int64_t tail_lo = std::max<int64_t>(0, min_items - positions);
    const int64_t tail_hi = max_items == kUnbounded ? kUnbounded : max_items - positions;
    inner = repeat(seq({sep, *item}), tail_lo, tail_hi);
  }
  const std::string prefix_path = pointer_append(path, prefix_key);
  auto at = [&](int64_t i) {
    return value(prefix[static_cast<size_t>(i)], pointer_append(prefix_path, std::to_string(i)));
  };
  for (int64_t i = positions - 1; i >= 1; --i) {
    const Expr here = seq({sep, at(i), inner});
    inner = i < min_items ? here : optional(here);
    // A rule every so often keeps long tuples from nesting parentheses without bound.
    if ((positions - i) % 32 == 0) inner = rule_ref(rules_.add("tuple-rest", inner));
  }
  const Expr elements = seq({at(0), inner});
  if (min_items >= 1) return seq({open, elements, ws(), close});
  return seq({open, optional(seq({elements, ws()})), close});
}

}  // namespace tandem::grammar::front
