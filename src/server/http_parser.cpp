#include "server/http_parser.h"

#include <fmt/format.h>
#include <strings.h>

#include <algorithm>
#include <charconv>

namespace tandem::server {

namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// RFC 9110 token characters (method and header names).
bool is_tchar(char c) {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), is_tchar);
}

// Whether a comma-separated header value (Connection, Transfer-Encoding) lists `token`.
bool lists_token(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    const size_t comma = value.find(',');
    if (iequals(trim(value.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Header values and targets quoted in messages are cut short; they come from the client.
std::string quoted(std::string_view v) {
  constexpr size_t kMax = 100;
  std::string out(v.substr(0, kMax));
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return v.size() > kMax ? out + "..." : out;
}

}  // namespace

std::string ParsedRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (iequals(k, name)) return v;
  return {};
}

bool percent_decode_path(std::string_view in, std::string& out) {
  out.clear();
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out += in[i];
      continue;
    }
    if (i + 2 >= in.size()) return false;
    const int hi = hex_digit(in[i + 1]), lo = hex_digit(in[i + 2]);
    if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) return false;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return true;
}

bool HttpRequestParser::fail(int status, std::string message) {
  state_ = State::kError;
  error_status_ = status;
  error_ = std::move(message);
  return false;
}

bool HttpRequestParser::take_line(std::string_view data, size_t& i) {
  const size_t nl = data.find('\n', i);
  const size_t end = nl == std::string_view::npos ? data.size() : nl;
  const size_t n = end - i;
  // The line counts against its budget before it is copied, so a client cannot make the parser
  // buffer more than the budget: the request line, headers and trailers share one; each line of
  // chunked framing has a small one of its own.
  const bool framing = body_ == Body::kChunkSize || body_ == Body::kChunkDataEnd;
  if (framing && line_.empty()) header_bytes_ = 0;
  header_bytes_ += n + (nl == std::string_view::npos ? 0 : 1);
  // Each line is held to one budget only: a framing line to its own, the others to the header
  // budget. (With both checked, a framing line longer than both hit whichever came first as its
  // bytes arrived, so the error depended on how the socket cut them: found by fuzz_http_request.)
  if (framing && header_bytes_ > kMaxChunkLineBytes)
    return fail(400, "Malformed chunked body: a chunk-size line too long");
  if (!framing && header_bytes_ > limits_.max_header_bytes)
    return fail(431, fmt::format("Request headers larger than {} bytes", limits_.max_header_bytes));
  line_.append(data.substr(i, n));
  i = nl == std::string_view::npos ? data.size() : nl + 1;
  if (nl == std::string_view::npos) return false;
  // A bare LF ends a line too (RFC 9112 section 2.2 allows recognising it).
  if (!line_.empty() && line_.back() == '\r') line_.pop_back();
  return true;
}

size_t HttpRequestParser::feed(std::string_view data) {
  size_t i = 0;
  while (i < data.size() && state_ != State::kDone && state_ != State::kError) {
    if (state_ == State::kStart || state_ == State::kHeaders) {
      const bool whole = take_line(data, i);
      // Empty lines before a request are skipped (RFC 9112 section 2.2); any other byte starts it.
      if (state_ == State::kStart && line_.find_first_not_of('\r') != std::string::npos)
        state_ = State::kHeaders;
      if (!whole) continue;
      const bool request_line = req_.method.empty();
      if (request_line && line_.empty()) continue;
      const bool ok = request_line ? on_request_line() : on_header_line();
      line_.clear();
      if (!ok) break;
      continue;
    }
    // The body.
    switch (body_) {
      case Body::kLength:
      case Body::kChunkData: {
        const size_t n = static_cast<size_t>(
            std::min<int64_t>(remaining_, static_cast<int64_t>(data.size() - i)));
        req_.body.append(data.substr(i, n));
        i += n;
        remaining_ -= n;
        if (remaining_ > 0) break;
        if (body_ == Body::kLength) {
          finish();
        } else {
          body_ = Body::kChunkDataEnd;
        }
        break;
      }
      case Body::kChunkDataEnd:
        // The CR LF after a chunk's data.
        if (!take_line(data, i)) break;
        if (!line_.empty()) {
          fail(400, "Malformed chunked body: chunk data longer than its size");
          break;
        }
        body_ = Body::kChunkSize;
        break;
      case Body::kChunkSize:
        if (take_line(data, i)) {
          const bool ok = on_chunk_size_line();
          line_.clear();
          if (!ok) break;
        }
        break;
      case Body::kTrailers:
        if (!take_line(data, i)) break;
        if (line_.empty()) {
          finish();
        } else {
          line_.clear();  // trailer fields are read and dropped
        }
        break;
      case Body::kNone:
        finish();
        break;
    }
  }
  return i;
}

bool HttpRequestParser::on_request_line() {
  // method SP request-target SP HTTP-version
  const std::string_view line = line_;
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
    return fail(400, fmt::format("Malformed request line '{}'", quoted(line)));
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!is_token(method)) return fail(400, fmt::format("Malformed method '{}'", quoted(method)));
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.' ||
      version[5] < '0' || version[5] > '9' || version[7] < '0' || version[7] > '9')
    return fail(400, fmt::format("Malformed HTTP version '{}'", quoted(version)));
  if (version[5] != '1')
    return fail(505,
                fmt::format("HTTP version {} is not supported (HTTP/1.1 is)", quoted(version)));
  req_.minor_version = version[7] - '0';
  req_.method = method;
  req_.target = target;
  std::string_view path = target;
  // absolute-form ("http://host/path", RFC 9112 section 3.2.2): the path is what follows the
  // authority.
  if (path.size() > 7 &&
      (iequals(path.substr(0, 7), "http://") || iequals(path.substr(0, 8), "https://"))) {
    const size_t slash = path.find('/', path.find("//") + 2);
    path = slash == std::string_view::npos ? std::string_view("/") : path.substr(slash);
  }
  const size_t q = path.find('?');
  if (q != std::string_view::npos) {
    req_.query = path.substr(q + 1);
    path = path.substr(0, q);
  }
  if (!(path.size() >= 1 && path[0] == '/') && !(target == "*" && method == "OPTIONS"))
    return fail(400, fmt::format("Malformed request target '{}'", quoted(target)));
  if (!percent_decode_path(path, req_.path))
    return fail(400, fmt::format("Malformed percent-encoding in '{}'", quoted(target)));
  return true;
}

bool HttpRequestParser::on_header_line() {
  if (line_.empty()) return on_headers_done();
  if (req_.headers.size() >= limits_.max_headers)
    return fail(431, fmt::format("More than {} request header fields", limits_.max_headers));
  // Obsolete line folding is refused (RFC 9112 section 5.2).
  if (line_[0] == ' ' || line_[0] == '\t') return fail(400, "Folded header lines are not allowed");
  const size_t colon = line_.find(':');
  const std::string_view line = line_;
  if (colon == std::string::npos || !is_token(line.substr(0, colon)))
    return fail(400, fmt::format("Malformed header line '{}'", quoted(line)));
  const std::string_view value = trim(line.substr(colon + 1));
  if (value.find('\0') != std::string_view::npos || value.find('\r') != std::string_view::npos)
    return fail(400, fmt::format("Malformed value of header '{}'", quoted(line.substr(0, colon))));
  req_.headers.emplace_back(std::string(line.substr(0, colon)), std::string(value));
  return true;
}

bool HttpRequestParser::on_headers_done() {
  bool close = false, keep_alive = false, has_te = false;
  std::string transfer_encoding;
  for (const auto& [name, value] : req_.headers) {
    if (iequals(name, "Connection")) {
      close = close || lists_token(value, "close");
      keep_alive = keep_alive || lists_token(value, "keep-alive");
    } else if (iequals(name, "Transfer-Encoding")) {
      has_te = true;
      transfer_encoding += (transfer_encoding.empty() ? "" : ",") + value;
    } else if (iequals(name, "Content-Length")) {
      int64_t n = -1;
      const char* end = value.data() + value.size();
      const auto [p, ec] = std::from_chars(value.data(), end, n);
      if (value.empty() || ec != std::errc() || p != end || n < 0)
        return fail(400, fmt::format("Malformed Content-Length '{}'", quoted(value)));
      if (req_.content_length >= 0 && req_.content_length != n)
        return fail(400, "Conflicting Content-Length headers");
      req_.content_length = n;
    } else if (iequals(name, "Expect")) {
      req_.expect_continue = iequals(value, "100-continue");
    }
  }
  req_.keep_alive = req_.minor_version >= 1 ? !close : keep_alive && !close;
  state_ = State::kBody;
  if (has_te) {
    // Only "chunked" alone: another coding would need decoding we do not do, and a body with
    // both framings is how requests get smuggled past proxies (RFC 9112 section 6.1).
    if (!iequals(trim(transfer_encoding), "chunked"))
      return fail(501, fmt::format("Transfer-Encoding '{}' is not supported (only chunked is)",
                                   quoted(transfer_encoding)));
    if (req_.content_length >= 0)
      return fail(400, "A request must not have both Content-Length and Transfer-Encoding");
    req_.chunked = true;
    body_ = Body::kChunkSize;
    return true;
  }
  if (req_.content_length > limits_.max_body_bytes)
    return fail(413, fmt::format("Request body over {} bytes", limits_.max_body_bytes));
  if (req_.content_length > 0) {
    body_ = Body::kLength;
    remaining_ = req_.content_length;
    req_.body.reserve(static_cast<size_t>(req_.content_length));
    return true;
  }
  finish();
  return true;
}

bool HttpRequestParser::on_chunk_size_line() {
  // chunk-size [; extensions]
  std::string_view line = line_;
  line = trim(line.substr(0, line.find(';')));
  if (line.empty() || line.size() > 16)
    return fail(400, fmt::format("Malformed chunk size '{}'", quoted(line_)));
  int64_t n = 0;
  for (char c : line) {
    const int d = hex_digit(c);
    if (d < 0) return fail(400, fmt::format("Malformed chunk size '{}'", quoted(line_)));
    if (n > (limits_.max_body_bytes >> 4)) {  // before it could overflow
      n = limits_.max_body_bytes + 1;
      break;
    }
    n = n * 16 + d;
  }
  if (n > limits_.max_body_bytes - static_cast<int64_t>(req_.body.size()))
    return fail(413, fmt::format("Request body over {} bytes", limits_.max_body_bytes));
  if (n == 0) {
    body_ = Body::kTrailers;
    header_bytes_ = 0;  // trailers get a header budget of their own
    return true;
  }
  body_ = Body::kChunkData;
  remaining_ = n;
  return true;
}

void HttpRequestParser::finish() {
  state_ = State::kDone;
  body_ = Body::kNone;
}

ParsedRequest HttpRequestParser::take() {
  ParsedRequest out = std::move(req_);
  req_ = ParsedRequest();
  state_ = State::kStart;
  body_ = Body::kNone;
  line_.clear();
  header_bytes_ = 0;
  remaining_ = 0;
  return out;
}

}  // namespace tandem::server
