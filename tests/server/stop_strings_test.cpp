// Stop strings over streamed text: matches that span deltas (and tokens), held-back prefixes,
// trimming and no_stop_trim, and several candidate strings.
#include <gtest/gtest.h>

#include "server/detokenizer.h"
#include "server/stop_strings.h"

namespace tandem::server {
namespace {

struct Fed {
  std::string text;
  bool stopped = false;
  std::string matched;
};

Fed feed(StopStringMatcher& m, const std::vector<std::string>& deltas) {
  Fed r;
  for (const std::string& d : deltas) {
    auto res = m.push(d);
    r.text += res.text;
    if (res.stopped) {
      r.stopped = true;
      r.matched = res.matched;
    }
  }
  r.text += m.flush();
  return r;
}

TEST(StopStrings, NoStopsPassesThrough) {
  StopStringMatcher m({}, false);
  EXPECT_EQ(m.push("abc").text, "abc");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopStrings, MatchSpanningDeltasIsTrimmed) {
  StopStringMatcher m({"STOP"}, false);
  auto r1 = m.push("hello S");
  EXPECT_EQ(r1.text, "hello ");  // "S" could start "STOP": held back
  auto r2 = m.push("TO");
  EXPECT_EQ(r2.text, "");
  auto r3 = m.push("P and more");
  EXPECT_TRUE(r3.stopped);
  EXPECT_EQ(r3.matched, "STOP");
  EXPECT_EQ(r3.text, "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.push("ignored").text, "");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopStrings, NoStopTrimKeepsTheStopString) {
  StopStringMatcher m({"STOP"}, true);
  const Fed r = feed(m, {"hello S", "TO", "P and more"});
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "hello STOP");
}

TEST(StopStrings, FalseStartIsReleased) {
  StopStringMatcher m({"STOP"}, false);
  const Fed r = feed(m, {"a ST", "ORE b"});
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(r.text, "a STORE b");
}

TEST(StopStrings, HeldPrefixFlushedAtEnd) {
  StopStringMatcher m({"\n\n"}, false);
  auto r = m.push("line\n");
  EXPECT_EQ(r.text, "line");
  EXPECT_EQ(m.flush(), "\n");
}

TEST(StopStrings, EarliestOfSeveralWins) {
  StopStringMatcher m({"world", "lo w"}, false);
  const Fed r = feed(m, {"hel", "lo wor", "ld"});
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.matched, "lo w");
  EXPECT_EQ(r.text, "hel");
}

TEST(StopStrings, OverlappingPrefixes) {
  // "aab": after "aa" the held tail must be "a"... then "ab" completes at offset 1.
  StopStringMatcher m({"ab"}, false);
  const Fed r = feed(m, {"a", "a", "b", "c"});
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "a");
}

TEST(StopStrings, EmptyStopStringsIgnored) {
  StopStringMatcher m({"", "x"}, false);
  const Fed r = feed(m, {"abc"});
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(r.text, "abc");
}

TEST(StopStrings, MultiByteStopSpanningByteTokens) {
  // Through the detokenizer: "你好" arrives one byte-token at a time.
  const Tokenizer tok = Tokenizer::from_json(make_byte_level_tokenizer_json({"<|endoftext|>"}));
  IncrementalDetokenizer d(tok, true);
  StopStringMatcher m({"你好"}, false);
  std::string out;
  bool stopped = false;
  size_t consumed = 0;
  const std::vector<int32_t> ids = tok.encode("说：你好吗");
  for (int32_t id : ids) {
    ++consumed;
    auto r = m.push(d.push(id));
    out += r.text;
    if (r.stopped) {
      stopped = true;
      break;
    }
  }
  EXPECT_TRUE(stopped);
  EXPECT_EQ(out, "说：");
  EXPECT_EQ(consumed, std::string("说：你好").size());  // stops on the token completing it
}

}  // namespace
}  // namespace tandem::server
