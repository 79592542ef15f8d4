// The HTTP request parser on its own: framing (Content-Length, chunked, none), any split of the
// input, pipelining, keep-alive rules, and every refusal with its status.
#include "server/http_parser.h"

#include <gtest/gtest.h>

#include <random>

namespace tandem::server {
namespace {

using State = HttpRequestParser::State;

// Feeds `text` in pieces of `step` bytes (0: all at once); returns the bytes consumed.
size_t feed(HttpRequestParser& p, const std::string& text, size_t step = 0) {
  size_t used = 0;
  while (used < text.size() && p.state() != State::kDone && p.state() != State::kError) {
    const size_t n = step == 0 ? text.size() - used : std::min(step, text.size() - used);
    const size_t k = p.feed(std::string_view(text).substr(used, n));
    used += k;
    if (k < n) break;
  }
  return used;
}

ParsedRequest parse_ok(const std::string& text, size_t step = 0, HttpParserLimits limits = {}) {
  HttpRequestParser p(limits);
  feed(p, text, step);
  EXPECT_EQ(p.state(), State::kDone) << p.error_message();
  return p.take();
}

int parse_error(const std::string& text, HttpParserLimits limits = {}) {
  HttpRequestParser p(limits);
  feed(p, text);
  EXPECT_EQ(p.state(), State::kError) << text;
  EXPECT_FALSE(p.error_message().empty());
  return p.error_status();
}

TEST(HttpParser, SimpleGet) {
  const ParsedRequest r = parse_ok("GET /v1/models?x=1 HTTP/1.1\r\nHost: a\r\nX-Y:  z \r\n\r\n");
  EXPECT_EQ(r.method, "GET");
  EXPECT_EQ(r.target, "/v1/models?x=1");
  EXPECT_EQ(r.path, "/v1/models");
  EXPECT_EQ(r.query, "x=1");
  EXPECT_EQ(r.minor_version, 1);
  EXPECT_EQ(r.header("x-y"), "z");
  EXPECT_EQ(r.header("Missing"), "");
  EXPECT_TRUE(r.keep_alive);
  EXPECT_TRUE(r.body.empty());
}

TEST(HttpParser, KeepAliveRules) {
  EXPECT_FALSE(parse_ok("GET / HTTP/1.1\r\nConnection: close\r\n\r\n").keep_alive);
  EXPECT_FALSE(parse_ok("GET / HTTP/1.1\r\nConnection: Upgrade, Close\r\n\r\n").keep_alive);
  EXPECT_FALSE(parse_ok("GET / HTTP/1.0\r\n\r\n").keep_alive);
  EXPECT_TRUE(parse_ok("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").keep_alive);
  EXPECT_EQ(parse_ok("GET / HTTP/1.0\r\n\r\n").minor_version, 0);
}

TEST(HttpParser, BareLineFeedsAndLeadingEmptyLines) {
  const ParsedRequest r = parse_ok("\r\n\nPOST /a HTTP/1.1\nContent-Length: 2\n\nhi");
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.body, "hi");
}

TEST(HttpParser, StartsAtTheFirstByteThatIsNotAnEmptyLine) {
  HttpRequestParser p;
  p.feed("\r\n\r");
  EXPECT_EQ(p.state(), State::kStart);
  p.feed("\nG");
  EXPECT_EQ(p.state(), State::kHeaders);
  p.feed("ET / HTTP/1.1\r\n\r\n");
  EXPECT_EQ(p.state(), State::kDone);
}

TEST(HttpParser, ContentLengthBodyAnySplit) {
  const std::string text =
      "POST /v1/completions HTTP/1.1\r\nContent-Type: application/json\r\n"
      "Content-Length: 11\r\n\r\n{\"a\": true}";
  for (size_t step : {0, 1, 2, 3, 7, 64}) {
    const ParsedRequest r = parse_ok(text, step);
    EXPECT_EQ(r.body, "{\"a\": true}") << step;
    EXPECT_EQ(r.content_length, 11);
    EXPECT_FALSE(r.chunked);
  }
}

TEST(HttpParser, ChunkedBodyWithExtensionsAndTrailersAnySplit) {
  const std::string text =
      "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5;name=value\r\nhello\r\n"
      "1\r\n \r\n"
      "A\r\n0123456789\r\n"
      "0\r\nX-Trailer: 1\r\n\r\n";
  for (size_t step : {0, 1, 2, 5, 13}) {
    const ParsedRequest r = parse_ok(text, step);
    EXPECT_EQ(r.body, "hello 0123456789") << step;
    EXPECT_TRUE(r.chunked);
  }
}

TEST(HttpParser, PipelinedRequestsStopAtTheFirstsEnd) {
  const std::string one = "POST /a HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc";
  const std::string two = "GET /b HTTP/1.1\r\n\r\n";
  HttpRequestParser p;
  const size_t used = p.feed(one + two);
  EXPECT_EQ(used, one.size());
  ASSERT_EQ(p.state(), State::kDone);
  EXPECT_EQ(p.take().body, "abc");
  EXPECT_EQ(p.state(), State::kStart);
  EXPECT_EQ(p.feed(two), two.size());
  ASSERT_EQ(p.state(), State::kDone);
  EXPECT_EQ(p.take().path, "/b");
}

TEST(HttpParser, HeadersDoneBeforeTheBodyAndExpectContinue) {
  HttpRequestParser p;
  p.feed("POST /a HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n");
  EXPECT_EQ(p.state(), State::kBody);
  EXPECT_TRUE(p.headers_done());
  EXPECT_TRUE(p.request().expect_continue);
  p.feed("ab");
  EXPECT_EQ(p.state(), State::kBody);
  p.feed("cd");
  EXPECT_EQ(p.state(), State::kDone);
}

TEST(HttpParser, PathsArePercentDecoded) {
  EXPECT_EQ(parse_ok("GET /v1/models/org%2Fname HTTP/1.1\r\n\r\n").path, "/v1/models/org/name");
  EXPECT_EQ(parse_ok("GET http://host:1/health?a HTTP/1.1\r\n\r\n").path, "/health");
  EXPECT_EQ(parse_ok("OPTIONS * HTTP/1.1\r\n\r\n").method, "OPTIONS");
  EXPECT_EQ(parse_error("GET /a%00b HTTP/1.1\r\n\r\n"), 400);
  EXPECT_EQ(parse_error("GET /a%G1 HTTP/1.1\r\n\r\n"), 400);
  EXPECT_EQ(parse_error("GET /a% HTTP/1.1\r\n\r\n"), 400);
}

TEST(HttpParser, MalformedRequestsAre400) {
  EXPECT_EQ(parse_error("GET\r\n\r\n"), 400);
  EXPECT_EQ(parse_error("GET / HTTP/1.1 extra\r\n\r\n"), 400);
  EXPECT_EQ(parse_error("G(T / HTTP/1.1\r\n\r\n"), 400);
  EXPECT_EQ(parse_error("GET / HTTX/1.1\r\n\r\n"), 400);
  EXPECT_EQ(parse_error("GET relative HTTP/1.1\r\n\r\n"), 400);
  EXPECT_EQ(parse_error("GET / HTTP/1.1\r\nNo colon here\r\n\r\n"), 400);
  EXPECT_EQ(parse_error("GET / HTTP/1.1\r\nBad Name: x\r\n\r\n"), 400);
  EXPECT_EQ(parse_error("GET / HTTP/1.1\r\nA: b\r\n  folded\r\n\r\n"), 400);
  EXPECT_EQ(parse_error("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n"), 400);
  EXPECT_EQ(parse_error("POST / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n"), 400);
  EXPECT_EQ(parse_error("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n"), 400);
  EXPECT_EQ(parse_error("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"), 400);
  EXPECT_EQ(parse_error("POST / HTTP/1.1\r\nContent-Length: 1\r\n"
                        "Transfer-Encoding: chunked\r\n\r\n"),
            400);
  EXPECT_EQ(parse_error("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"), 400);
  EXPECT_EQ(parse_error("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n"), 400);
  EXPECT_EQ(
      parse_error("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + std::string(2000, '1')),
      400);
  // Equal duplicates are fine.
  EXPECT_EQ(parse_ok("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx").body,
            "x");
}

TEST(HttpParser, UnsupportedVersionAndCodings) {
  EXPECT_EQ(parse_error("GET / HTTP/2.0\r\n\r\n"), 505);
  EXPECT_EQ(parse_error("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"), 501);
}

TEST(HttpParser, HeaderLimits) {
  HttpParserLimits small;
  small.max_header_bytes = 200;
  small.max_headers = 3;
  EXPECT_EQ(parse_error("GET /" + std::string(300, 'a') + " HTTP/1.1\r\n\r\n", small), 431);
  EXPECT_EQ(parse_error("GET / HTTP/1.1\r\nA: " + std::string(300, 'a'), small), 431);
  EXPECT_EQ(parse_error("GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n", small), 431);
  // An endless header line is refused once it passes the budget, without being buffered.
  HttpRequestParser p(small);
  p.feed("GET / HTTP/1.1\r\nA: ");
  for (int i = 0; i < 100 && p.state() != State::kError; ++i) p.feed(std::string(10, 'x'));
  EXPECT_EQ(p.state(), State::kError);
  EXPECT_EQ(p.error_status(), 431);
}

TEST(HttpParser, BodyLimits) {
  HttpParserLimits small;
  small.max_body_bytes = 10;
  EXPECT_EQ(parse_ok("POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123456789", 0, small).body,
            "0123456789");
  EXPECT_EQ(parse_error("POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n", small), 413);
  const std::string chunked = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  EXPECT_EQ(parse_error(chunked + "6\r\n012345\r\n5\r\n", small), 413);
  EXPECT_EQ(parse_error(chunked + "ffffffffffffffff\r\n", small), 413);
  EXPECT_EQ(parse_error(chunked + "fffffffffffffffff\r\n", small), 400);  // 17 digits
  // Many small chunks: the framing does not count against the body limit.
  std::string many = chunked;
  for (int i = 0; i < 10; ++i) many += "1\r\nx\r\n";
  EXPECT_EQ(parse_ok(many + "0\r\n\r\n", 0, small).body, std::string(10, 'x'));
  // Nor against the header budget: 2,000 one-byte chunks.
  std::string longer = chunked;
  for (int i = 0; i < 2000; ++i) longer += "1;ext=" + std::string(40, 'e') + "\r\nx\r\n";
  EXPECT_EQ(parse_ok(longer + "0\r\n\r\n").body.size(), 2000u);
}

// A chunk-size line longer than both the framing budget (1 KiB) and a small header budget: it
// used to hit whichever came first as its bytes arrived, so the answer depended on how the socket
// cut them (400 whole, 431 in pieces; found by fuzz_http_request's 1M-run campaign). A framing
// line is held to its own budget only; headers and trailers to the header budget.
TEST(HttpParser, ALongChunkLineGetsTheSameErrorHoweverItArrives) {
  HttpParserLimits small;
  small.max_header_bytes = 256;
  const std::string req =
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n6;ext=" + std::string(1100, 'e') +
      "\r\n";
  for (size_t step : {size_t{0}, size_t{1}, size_t{4}, size_t{100}}) {
    HttpRequestParser p(small);
    feed(p, req, step);
    EXPECT_EQ(p.state(), State::kError) << step;
    EXPECT_EQ(p.error_status(), 400) << step << ": " << p.error_message();
  }
  // A 300-byte chunk line is within its own budget, even with a 256-byte header budget.
  const ParsedRequest r = parse_ok("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2;ext=" +
                                       std::string(300, 'e') + "\r\nhi\r\n0\r\n\r\n",
                                   1, small);
  EXPECT_EQ(r.body, "hi");
  // Trailers still count against the header budget.
  HttpRequestParser t(small);
  feed(t, "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T: " +
              std::string(300, 't') + "\r\n\r\n");
  EXPECT_EQ(t.error_status(), 431);
}

// Random bytes and random cuts of valid requests: the parser ends in a defined state and never
// consumes more than it was given.
TEST(HttpParser, RandomInputNeverBreaksIt) {
  std::mt19937 rng(7);
  const std::string valid =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
      "4\r\nabcd\r\n0\r\n\r\n";
  const std::string alphabet = "GETPOST /:\r\n0123456789abcdefHTTP/1.;%-";
  for (int iter = 0; iter < 20000; ++iter) {
    std::string text = valid;
    const int edits = static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) text[rng() % text.size()] = alphabet[rng() % alphabet.size()];
    if (iter % 2) {
      text.clear();
      const size_t n = rng() % 200;
      for (size_t i = 0; i < n; ++i) text += static_cast<char>(rng() % 256);
    }
    HttpParserLimits limits;
    limits.max_header_bytes = 256;
    limits.max_body_bytes = 64;
    HttpRequestParser p(limits);
    size_t used = 0;
    while (used < text.size() && p.state() != State::kDone && p.state() != State::kError) {
      const size_t n = std::min<size_t>(1 + rng() % 8, text.size() - used);
      const size_t k = p.feed(std::string_view(text).substr(used, n));
      ASSERT_LE(k, n);
      used += k;
    }
    if (p.state() == State::kError) {
      ASSERT_GE(p.error_status(), 400);
      ASSERT_FALSE(p.error_message().empty());
      ASSERT_LE(p.error_message().size(), 300u);
    }
    if (p.state() == State::kDone) {
      ASSERT_LE(p.take().body.size(), 64u);
    }
  }
}

}  // namespace
}  // namespace tandem::server
