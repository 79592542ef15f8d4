// Stop strings over streamed text. A stop string may span several tokens (and several deltas),
// so text that could still turn out to be the start of one is held back until it is decided.
// When one matches, generation ends there and the output is cut before it (or, with
// no_stop_trim, after it), as SGLang's detokenizer does.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tandem::server {

class StopStringMatcher {
 public:
  StopStringMatcher(std::vector<std::string> stops, bool no_stop_trim);

  struct Result {
    std::string text;      // safe to emit
    bool stopped = false;  // a stop string matched; later input is ignored
    std::string matched;   // which one
  };
  Result push(std::string_view text);
  // End of generation without a match: the held-back tail.
  std::string flush();

  bool stopped() const { return stopped_; }
  bool empty() const { return stops_.empty(); }

 private:
  std::vector<std::string> stops_;
  bool no_stop_trim_;
  bool stopped_ = false;
  std::string pending_;
};

}  // namespace tandem::server
