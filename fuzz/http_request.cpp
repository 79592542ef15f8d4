// Fuzzes the HTTP request parser the transport feeds with socket reads (src/server/http_parser.h).
// Besides surviving any bytes: it never takes more than it is given, never takes less unless a
// request ended or failed, keeps bodies within the limit, and gives the same requests (and the
// same error) however the bytes are cut, one at a time included. Pipelined requests are parsed
// one after the other, as the server does.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "server/http_parser.h"

namespace {

using tandem::server::HttpParserLimits;
using tandem::server::HttpRequestParser;
using State = HttpRequestParser::State;

void check(bool ok) {
  if (!ok) std::abort();
}

// Every request (or the error) the input gives, fed in pieces of `piece` bytes, as one string.
std::string parse(std::string_view in, size_t piece, const HttpParserLimits& limits) {
  HttpRequestParser p(limits);
  std::string out;
  size_t pos = 0;
  while (pos < in.size()) {
    const size_t n = std::min(piece, in.size() - pos);
    const size_t k = p.feed(in.substr(pos, n));
    check(k <= n);
    pos += k;
    if (p.state() == State::kDone) {
      const tandem::server::ParsedRequest r = p.take();
      check(static_cast<int64_t>(r.body.size()) <= limits.max_body_bytes);
      check(r.headers.size() <= limits.max_headers);
      check(!r.method.empty() && (r.path == "*" || (!r.path.empty() && r.path[0] == '/')));
      out += r.method + ' ' + r.target + ' ' + r.path + ' ' + std::to_string(r.minor_version) +
             (r.keep_alive ? " keep " : " close ") + std::to_string(r.headers.size()) + ' ' +
             std::to_string(r.body.size()) + ':' + r.body + '\n';
      continue;
    }
    if (p.state() == State::kError) {
      check(p.error_status() >= 400 && p.error_status() < 600 && !p.error_message().empty());
      out += "error " + std::to_string(p.error_status()) + ' ' + p.error_message() + '\n';
      return out;
    }
    check(k == n);  // an unfinished request takes everything
  }
  return out + "state " + std::to_string(static_cast<int>(p.state())) + '\n';
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks the piece size and the limits; the rest is the stream.
  const uint8_t pick = data[0];
  const std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  HttpParserLimits limits;
  if (pick & 0x80) {  // small limits, so inputs reach them
    limits.max_header_bytes = 256;
    limits.max_headers = 8;
    limits.max_body_bytes = 64;
  }
  const size_t piece = 1 + (pick & 0x1f);
  const std::string whole = parse(in, in.size() + 1, limits);
  check(parse(in, piece, limits) == whole);
  check(parse(in, 1, limits) == whole);
  return 0;
}
