#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench_client/sse.h"

namespace tandem::bench {
namespace {

std::vector<std::string> parse_in_pieces(const std::string& body, const std::vector<size_t>& cuts) {
  std::vector<std::string> events;
  SseParser p([&](std::string_view d) { events.emplace_back(d); });
  size_t prev = 0;
  for (size_t c : cuts) {
    p.feed(std::string_view(body).substr(prev, c - prev));
    prev = c;
  }
  p.feed(std::string_view(body).substr(prev));
  p.finish();
  return events;
}

TEST(Sse, SplitsEventsAtEveryPossibleChunkBoundary) {
  const std::string body =
      "data: {\"text\":\"a\"}\n\n"
      ": keep-alive comment\n\n"
      "data: {\"text\":\"ab\"}\r\n\r\n"
      "event: message\nid: 7\ndata:{\"text\":\"abc\"}\r\r"
      "data: [DONE]\n\n";
  const std::vector<std::string> want = {"{\"text\":\"a\"}", "{\"text\":\"ab\"}",
                                         "{\"text\":\"abc\"}", "[DONE]"};
  EXPECT_EQ(parse_in_pieces(body, {}), want);
  // Every single cut and every pair of cuts: a chunk can end anywhere, inside "\r\n" included.
  for (size_t i = 0; i <= body.size(); ++i) {
    EXPECT_EQ(parse_in_pieces(body, {i}), want) << "cut at " << i;
    for (size_t j = i; j <= body.size(); j += 3) EXPECT_EQ(parse_in_pieces(body, {i, j}), want);
  }
  // One byte at a time.
  std::vector<size_t> all;
  for (size_t i = 1; i < body.size(); ++i) all.push_back(i);
  EXPECT_EQ(parse_in_pieces(body, all), want);
}

TEST(Sse, JoinsMultiLineDataAndFlushesAnUnterminatedEvent) {
  EXPECT_EQ(parse_in_pieces("data: line1\ndata: line2\n\ndata: tail", {9}),
            (std::vector<std::string>{"line1\nline2", "tail"}));
  // Only one leading space is part of the field syntax.
  EXPECT_EQ(parse_in_pieces("data:  two spaces\n\n", {}),
            (std::vector<std::string>{" two spaces"}));
  // Blank lines alone dispatch nothing.
  EXPECT_TRUE(parse_in_pieces("\n\n\r\n: ping\n\n", {}).empty());
}

}  // namespace
}  // namespace tandem::bench
