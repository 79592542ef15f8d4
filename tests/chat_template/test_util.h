// Helpers shared by the chat template tests.
#pragma once

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>
#include <string>

namespace tandem::test {

inline nlohmann::ordered_json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return nullptr;
  std::ostringstream s;
  s << in.rdbuf();
  return nlohmann::ordered_json::parse(s.str());
}

// Where two renders first differ, with some context, so a whitespace slip is easy to spot.
inline std::string first_difference(const std::string& want, const std::string& got) {
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  size_t from = i < 40 ? 0 : i - 40;
  auto show = [&](const std::string& s) {
    return nlohmann::json(s.substr(from, std::min<size_t>(80, s.size() - std::min(from, s.size()))))
        .dump();
  };
  std::ostringstream out;
  out << "first difference at byte " << i << " (lengths " << want.size() << " vs " << got.size()
      << ")\n  expected: ..." << show(want) << "\n  actual:   ..." << show(got);
  return out.str();
}

}  // namespace tandem::test
