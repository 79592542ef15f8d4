// SSE framing: one data line per event, a blank line after it, [DONE] at the end, errors as
// {"error": {...}} events.
#include <gtest/gtest.h>

#include "server/sse.h"

namespace tandem::server {
namespace {

TEST(Sse, EventFraming) {
  const std::string e = sse_event(Json{{"text", "line1\nline2 \"q\" é"}});
  EXPECT_EQ(e, "data: {\"text\":\"line1\\nline2 \\\"q\\\" é\"}\n\n");
  EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
}

TEST(Sse, ErrorEventThenDone) {
  const std::string s = sse_error(500, "boom");
  const auto payloads = sse_data_payloads(s);
  ASSERT_EQ(payloads.size(), 2u);
  const Json err = Json::parse(payloads[0]);
  EXPECT_EQ(err["error"]["message"], "boom");
  EXPECT_EQ(err["error"]["code"], 500);
  EXPECT_EQ(err["error"]["type"], "InternalServerError");
  EXPECT_EQ(payloads[1], "[DONE]");
}

TEST(Sse, PayloadParser) {
  const std::string s =
      ": keep-alive\n\ndata: {\"a\":1}\n\ndata:{\"b\":2}\n\ndata: [DONE]\n\ndata: partial";
  const auto p = sse_data_payloads(s);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0], "{\"a\":1}");
  EXPECT_EQ(p[1], "{\"b\":2}");
  EXPECT_EQ(p[2], "[DONE]");
}

TEST(Sse, InvalidUtf8NeverThrows) {
  // Generated text is repaired before it gets here; the guard keeps a bug from becoming a crash.
  EXPECT_NO_THROW(sse_event(Json{{"text", std::string("bad \xC3")}}));
}

}  // namespace
}  // namespace tandem::server
