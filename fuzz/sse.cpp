// Fuzzes both SSE parsers: the server's sse_data_payloads (tests and clients of the server's own
// streams) and the bench client's incremental SseParser, which reads other servers' streams in
// whatever pieces the socket delivers. Besides surviving any bytes, the bench parser must give
// the same events however the stream is cut, and an event the server frames must come back out
// of both parsers as exactly the JSON it carried.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "bench_client/sse.h"
#include "server/sse.h"

namespace {

// The first byte picks where the stream is cut; the rest is the stream.
std::vector<std::string> parse_in_pieces(std::string_view stream, size_t piece, bool finish) {
  std::vector<std::string> out;
  tandem::bench::SseParser p([&](std::string_view d) { out.emplace_back(d); });
  for (size_t i = 0; i < stream.size(); i += piece) p.feed(stream.substr(i, piece));
  if (finish) p.finish();
  return out;
}

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t piece = 1 + data[0] % 16;
  const std::string_view stream(reinterpret_cast<const char*>(data) + 1, size - 1);

  (void)tandem::server::sse_data_payloads(stream);

  const auto whole = parse_in_pieces(stream, stream.size() + 1, true);
  check(parse_in_pieces(stream, piece, true) == whole);
  check(parse_in_pieces(stream, 1, false).size() <= whole.size());

  // Framing round trip: the input as a JSON string (invalid UTF-8 replaced, as dump_json does).
  const tandem::server::Json value = std::string(stream);
  const std::string event = tandem::server::sse_event(value) + tandem::server::sse_done();
  const std::string expected = tandem::server::dump_json(value);
  const auto server = tandem::server::sse_data_payloads(event);
  check(server.size() == 2 && server[0] == expected && server[1] == "[DONE]");
  const auto bench = parse_in_pieces(event, piece, false);
  check(bench.size() == 2 && bench[0] == expected && bench[1] == "[DONE]");
  return 0;
}
