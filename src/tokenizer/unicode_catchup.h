// Unicode version catch-up. The system libraries and Hugging Face tokenizers know different
// Unicode versions: Debian 12's PCRE2 has 14.0 where HF's Oniguruma has 16.0, utf8proc has 15.0
// where Rust's lowercase has 17.0, and HF's normalizer tables are only 9.0. Without these
// tables, characters assigned in between (new emoji such as U+1FA77 pink heart, CJK Extension
// H and I, new scripts) would be split, lowercased or normalized differently from HF.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tandem::tok {

struct CategoryRange {
  char32_t first;
  char32_t last;
  const char* category;  // the Unicode 16.0 general category, two letters ("Lo", "So", ...)
};

// Code points whose general category differs between Unicode 14.0 and 16.0 (generated).
const std::vector<CategoryRange>& unicode_catchup_ranges();

// Simple lowercase mappings new since utf8proc's Unicode 15.0 up to the 17.0 of Rust's
// char::to_lowercase, sorted by code point (generated).
const std::vector<std::pair<char32_t, char32_t>>& unicode_catchup_lowercase();

// Code points HF's normalizers do not know (assigned after Unicode 9.0), sorted, as inclusive
// ranges (generated). NFC/NFD/NFKC/NFKD leave them, and their neighbours across them, alone.
const std::vector<std::pair<char32_t, char32_t>>& normalization_opaque_ranges();

// The lowercase of `cp` from unicode_catchup_lowercase(), or `cp` itself.
char32_t catchup_lowercase(char32_t cp);
bool is_normalization_opaque(char32_t cp);

// The Unicode 16.0 general category of `cp` if the table has it, else nullptr.
const char* catchup_category(char32_t cp);

// PCRE2 class items (no brackets) for the catch-up code points in the general category named
// `property` ("L", "Letter", "Nd", "So", ...); empty when there are none or it is not a category.
std::string catchup_class_items(std::string_view property);

}  // namespace tandem::tok
