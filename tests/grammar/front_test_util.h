// Shared by the JSON Schema and regex front-end tests: an independent check of a generated
// grammar (the engine's Earley reference recognizer over the parsed EBNF) and the data files.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <string_view>

#include "grammar/earley.h"
#include "grammar/ir.h"

namespace tandem::grammar::test {

using Json = nlohmann::ordered_json;

class Recognizer {
 public:
  explicit Recognizer(const std::string& ebnf)
      : earley_(std::make_unique<EarleyRecognizer>(ir::parse_ebnf(ebnf))) {}
  bool accepts(std::string_view text) const {
    // The empty string goes through the incremental API: it never extends the chart.
    if (text.empty()) return earley_->complete(earley_->start());
    return earley_->is_sentence(text);
  }

 private:
  std::unique_ptr<EarleyRecognizer> earley_;
};

inline Json read_data_json(const std::string& relative) {
  std::ifstream in(std::string(TANDEM_SOURCE_DIR) + "/tests/data/grammar/" + relative);
  if (!in) return Json();
  std::stringstream ss;
  ss << in.rdbuf();
  return Json::parse(ss.str());
}

// Readable in failure messages: control bytes and non-ASCII escaped.
inline std::string show(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
    } else {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

}  // namespace tandem::grammar::test
