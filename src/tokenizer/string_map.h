// Hash maps keyed by std::string that can be probed with a std::string_view (no temporary
// string per lookup on the encode hot path).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace tandem::tok {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

template <typename V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

}  // namespace tandem::tok
