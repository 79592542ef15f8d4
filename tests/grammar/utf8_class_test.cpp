// Character classes become UTF-8 byte-range paths: every sampled code point must be matched by
// exactly the classes that contain it (negation, 2-, 3- and 4-byte encodings, the edges of each
// length and of the surrogate gap), and no invalid UTF-8 (surrogates, overlongs, past
// U+10FFFF, stray continuation bytes) ever matches.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "grammar/utf8_ranges.h"
#include "test_util.h"

namespace tandem::grammar {
namespace {

std::string utf8(uint32_t cp) {
  std::string out;
  append_utf8(out, cp);
  return out;
}

bool is_scalar(uint32_t cp) {
  return cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF);
}

// Code points worth testing: the edges of every encoded length and of the surrogates, the
// class's own edges and their neighbours, and random ones of every length.
std::vector<uint32_t> sample_code_points(const std::vector<ir::CodeRange>& ranges,
                                         std::mt19937_64& rng) {
  std::vector<uint32_t> cps = {0,       1,       0x7F,    0x80,    0x7FF,    0x800,
                               0xFFF,   0x1000,  0xD7FF,  0xE000,  0xFFFD,   0xFFFF,
                               0x10000, 0x3FFFF, 0x40000, 0xFFFFF, 0x100000, 0x10FFFF};
  for (auto r : ranges) {
    for (int64_t d = -1; d <= 1; ++d) {
      for (int64_t base : {static_cast<int64_t>(r.lo), static_cast<int64_t>(r.hi)}) {
        if (base + d >= 0 && is_scalar(static_cast<uint32_t>(base + d))) cps.push_back(base + d);
      }
    }
  }
  for (uint32_t limit : {0x80u, 0x800u, 0x10000u, 0x110000u}) {
    for (int i = 0; i < 60; ++i) {
      const uint32_t cp = static_cast<uint32_t>(rng() % limit);
      if (is_scalar(cp)) cps.push_back(cp);
    }
  }
  return cps;
}

// The class's code points (it may match nothing: the grammar around it keeps root non-empty).
std::vector<ir::CodeRange> code_points_of(const std::string& cls) {
  const ir::Grammar g = ir::parse_ebnf("root ::= " + cls + " | \"z\"");
  return ir::class_code_points(g.exprs[g.exprs[g.rules[0].body].items[0]]);
}

bool in_ranges(const std::vector<ir::CodeRange>& rs, uint32_t cp) {
  for (auto r : rs)
    if (r.lo <= cp && cp <= r.hi) return true;
  return false;
}

std::string hex8(uint32_t cp) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "\\U%08X", cp);
  return buf;
}

// A random class in EBNF: a few ranges with endpoints near interesting boundaries.
std::string random_class(std::mt19937_64& rng) {
  static constexpr uint32_t kEdges[] = {0x00,    0x20,    0x41,    0x7F,     0x80,    0x100,
                                        0x7FF,   0x800,   0x4E00,  0xD7FF,   0xE000,  0xFFFF,
                                        0x10000, 0x1F600, 0x1F64F, 0x100000, 0x10FFFF};
  std::string s = rng() % 3 == 0 ? "[^" : "[";
  for (int k = 1 + static_cast<int>(rng() % 4); k > 0; --k) {
    uint32_t a = kEdges[rng() % std::size(kEdges)] + static_cast<uint32_t>(rng() % 3);
    uint32_t b = kEdges[rng() % std::size(kEdges)] + static_cast<uint32_t>(rng() % 3);
    a = std::min(a, 0x10FFFFu), b = std::min(b, 0x10FFFFu);
    if (a > b) std::swap(a, b);
    s += hex8(a) + "-" + hex8(b);
  }
  return s + "]";
}

TEST(Utf8Classes, SequencesCoverExactlyTheClass) {
  const uint64_t seed = testing::seed_from_env(1234);
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  for (int c = 0; c < 200; ++c) {
    const std::string cls = random_class(rng);
    const auto ranges = code_points_of(cls);
    const auto seqs = utf8_sequences(ranges);
    for (uint32_t cp : sample_code_points(ranges, rng)) {
      const std::string b = utf8(cp);
      int matches = 0;
      for (const ByteSeq& s : seqs) {
        if (s.size() != b.size()) continue;
        bool ok = true;
        for (size_t i = 0; i < s.size(); ++i) {
          const uint8_t x = static_cast<uint8_t>(b[i]);
          ok = ok && s[i].lo <= x && x <= s[i].hi;
        }
        matches += ok;
      }
      ASSERT_EQ(matches, in_ranges(ranges, cp) ? 1 : 0) << cls << " U+" << std::hex << cp;
    }
  }
}

TEST(Utf8Classes, MatcherAcceptsExactlyTheClass) {
  const uint64_t seed = testing::seed_from_env(5678);
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  auto vocab = testing::byte_vocab();
  const auto ids = testing::byte_ids(*vocab);
  std::vector<std::string> classes = {
      "[^\\x00-\\x7f]",    "[\\U0001F600-\\U0001F64F]",  "[^\"\\\\\\x00-\\x1f]",
      "[\\u4e00-\\u9fff]", "[^\\U00010000-\\U0010FFFF]", "[\\u0000-\\uFFFF]"};
  for (int c = 0; c < 60; ++c) classes.push_back(random_class(rng));
  for (const std::string& cls : classes) {
    const auto ranges = code_points_of(cls);
    if (ranges.empty()) continue;  // compile refuses a grammar that matches nothing
    auto cg = compile("root ::= " + cls, vocab);
    for (uint32_t cp : sample_code_points(ranges, rng)) {
      Matcher m(cg);
      bool alive = true;
      for (char b : utf8(cp)) alive = alive && m.accept_token(ids[static_cast<uint8_t>(b)]);
      ASSERT_EQ(alive && m.can_terminate(), in_ranges(ranges, cp))
          << cls << " U+" << std::hex << cp;
    }
    // Never valid UTF-8, whatever the class.
    for (const char* bad : {"\xED\xA0\x80", "\xED\xBF\xBF", "\xC0\x80", "\xC1\xBF", "\xE0\x80\x80",
                            "\xE0\x9F\xBF", "\xF0\x80\x80\x80", "\xF0\x8F\xBF\xBF",
                            "\xF4\x90\x80\x80", "\xF5\x80\x80\x80", "\x80", "\xBF", "\xFF"}) {
      Matcher m(cg);
      bool alive = true;
      for (const char* p = bad; *p && alive; ++p)
        alive = m.accept_token(ids[static_cast<uint8_t>(*p)]);
      ASSERT_FALSE(alive && m.can_terminate()) << cls;
    }
  }
}

TEST(Utf8Classes, FourByteAndNegatedInSequence) {
  auto vocab = testing::byte_vocab();
  const auto ids = testing::byte_ids(*vocab);
  auto cg = compile(R"(root ::= [^a-z]+ "!" [\U0001F600-\U0001F64F]{2})", vocab);
  auto run = [&](const std::string& s) {
    Matcher m(cg);
    for (char b : s)
      if (!m.accept_token(ids[static_cast<uint8_t>(b)])) return false;
    return m.can_terminate();
  };
  EXPECT_TRUE(run("A\xC3\xA9\xF0\x9F\x98\x80!\xF0\x9F\x98\x80\xF0\x9F\x99\x8F"));
  EXPECT_FALSE(run("Ab!\xF0\x9F\x98\x80\xF0\x9F\x98\x80"));
  EXPECT_FALSE(run("A!\xF0\x9F\x98\x80\xF0\x9F\x99\x90"));  // U+1F650 is past the class
  EXPECT_FALSE(run("A!\xF0\x9F\x98\x80"));
}

}  // namespace
}  // namespace tandem::grammar
