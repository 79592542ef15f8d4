// Lookups over the generated table in unicode_catchup.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "tokenizer/unicode_catchup.h"

namespace tandem::tok {
namespace {

// Lowercase without '_', '-' and spaces: Oniguruma matches property names loosely.
std::string loose(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (c != '_' && c != '-' && c != ' ') out.push_back(static_cast<char>(std::tolower(c)));
  }
  return out;
}

// The two-letter categories a property name covers, as a prefix-or-exact pattern: "L" covers
// every "L?", "Lu" only "Lu". Empty for names that are not general categories (scripts etc.).
std::vector<std::string> categories_of(std::string_view property) {
  static const std::vector<std::pair<const char*, std::vector<std::string>>> kNames = {
      {"l", {"L"}},
      {"letter", {"L"}},
      {"lc", {"Lu", "Ll", "Lt"}},
      {"l&", {"Lu", "Ll", "Lt"}},
      {"casedletter", {"Lu", "Ll", "Lt"}},
      {"lu", {"Lu"}},
      {"uppercaseletter", {"Lu"}},
      {"ll", {"Ll"}},
      {"lowercaseletter", {"Ll"}},
      {"lt", {"Lt"}},
      {"titlecaseletter", {"Lt"}},
      {"lm", {"Lm"}},
      {"modifierletter", {"Lm"}},
      {"lo", {"Lo"}},
      {"otherletter", {"Lo"}},
      {"m", {"M"}},
      {"mark", {"M"}},
      {"combiningmark", {"M"}},
      {"mn", {"Mn"}},
      {"nonspacingmark", {"Mn"}},
      {"mc", {"Mc"}},
      {"spacingmark", {"Mc"}},
      {"me", {"Me"}},
      {"enclosingmark", {"Me"}},
      {"n", {"N"}},
      {"number", {"N"}},
      {"nd", {"Nd"}},
      {"decimalnumber", {"Nd"}},
      {"digit", {"Nd"}},
      {"nl", {"Nl"}},
      {"letternumber", {"Nl"}},
      {"no", {"No"}},
      {"othernumber", {"No"}},
      {"p", {"P"}},
      {"punctuation", {"P"}},
      {"punct", {"P"}},
      {"pc", {"Pc"}},
      {"connectorpunctuation", {"Pc"}},
      {"pd", {"Pd"}},
      {"dashpunctuation", {"Pd"}},
      {"ps", {"Ps"}},
      {"openpunctuation", {"Ps"}},
      {"pe", {"Pe"}},
      {"closepunctuation", {"Pe"}},
      {"pi", {"Pi"}},
      {"initialpunctuation", {"Pi"}},
      {"pf", {"Pf"}},
      {"finalpunctuation", {"Pf"}},
      {"po", {"Po"}},
      {"otherpunctuation", {"Po"}},
      {"s", {"S"}},
      {"symbol", {"S"}},
      {"sm", {"Sm"}},
      {"mathsymbol", {"Sm"}},
      {"sc", {"Sc"}},
      {"currencysymbol", {"Sc"}},
      {"sk", {"Sk"}},
      {"modifiersymbol", {"Sk"}},
      {"so", {"So"}},
      {"othersymbol", {"So"}},
      {"z", {"Z"}},
      {"separator", {"Z"}},
      {"zs", {"Zs"}},
      {"spaceseparator", {"Zs"}},
      {"zl", {"Zl"}},
      {"lineseparator", {"Zl"}},
      {"zp", {"Zp"}},
      {"paragraphseparator", {"Zp"}},
  };
  const std::string key = loose(property);
  for (const auto& [name, cats] : kNames) {
    if (key == name) return cats;
  }
  return {};
}

}  // namespace

const char* catchup_category(char32_t cp) {
  const auto& ranges = unicode_catchup_ranges();
  auto it = std::upper_bound(ranges.begin(), ranges.end(), cp,
                             [](char32_t c, const CategoryRange& r) { return c < r.first; });
  if (it == ranges.begin()) return nullptr;
  --it;
  return cp <= it->last ? it->category : nullptr;
}

char32_t catchup_lowercase(char32_t cp) {
  const auto& pairs = unicode_catchup_lowercase();
  auto it = std::lower_bound(pairs.begin(), pairs.end(), std::make_pair(cp, char32_t{0}));
  return it != pairs.end() && it->first == cp ? it->second : cp;
}

bool is_normalization_opaque(char32_t cp) {
  const auto& ranges = normalization_opaque_ranges();
  auto it = std::upper_bound(
      ranges.begin(), ranges.end(), cp,
      [](char32_t c, const std::pair<char32_t, char32_t>& r) { return c < r.first; });
  return it != ranges.begin() && cp <= std::prev(it)->second;
}

std::string catchup_class_items(std::string_view property) {
  const std::vector<std::string> cats = categories_of(property);
  std::string items;
  for (const CategoryRange& r : unicode_catchup_ranges()) {
    const std::string_view c = r.category;
    const bool covered = std::any_of(cats.begin(), cats.end(), [&](const std::string& want) {
      return want.size() == 1 ? c[0] == want[0] : c == want;
    });
    if (!covered) continue;
    items += r.first == r.last
                 ? fmt::format("\\x{{{:X}}}", static_cast<uint32_t>(r.first))
                 : fmt::format("\\x{{{:X}}}-\\x{{{:X}}}", static_cast<uint32_t>(r.first),
                               static_cast<uint32_t>(r.last));
  }
  return items;
}

}  // namespace tandem::tok
