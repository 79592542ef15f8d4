#include "distributed/tcp.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

namespace tandem::tcp {

namespace {

std::string err() {
  return std::strerror(errno);
}

int remaining_ms(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(left, 1 << 30)));
}

struct AddrInfo {
  addrinfo* list = nullptr;
  ~AddrInfo() {
    if (list) freeaddrinfo(list);
  }
};

AddrInfo resolve(const Address& a, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  AddrInfo r;
  const std::string port = std::to_string(a.port);
  const int rc =
      getaddrinfo(a.host.empty() ? nullptr : a.host.c_str(), port.c_str(), &hints, &r.list);
  if (rc != 0) throw PeerError(fmt::format("cannot resolve {}: {}", a.str(), gai_strerror(rc)));
  return r;
}

void no_delay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// Waits until fd is readable; false when the deadline passes.
bool wait_readable(int fd, std::optional<Clock::time_point> deadline) {
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const int rc = poll(&p, 1, deadline ? remaining_ms(*deadline) : -1);
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) throw PeerError(fmt::format("poll failed: {}", err()));
  }
}

}  // namespace

Address parse_address(const std::string& s) {
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon + 1 == s.size())
    throw InvalidArgument(fmt::format("'{}' is not host:port", s));
  Address a;
  a.host = s.substr(0, colon);
  if (a.host.size() >= 2 && a.host.front() == '[' && a.host.back() == ']')
    a.host = a.host.substr(1, a.host.size() - 2);
  const std::string port = s.substr(colon + 1);
  char* end = nullptr;
  const long p = std::strtol(port.c_str(), &end, 10);
  if (*end != '\0' || p < 0 || p > 65535)
    throw InvalidArgument(fmt::format("'{}': port '{}' is not a number in [0, 65535]", s, port));
  a.port = static_cast<int>(p);
  return a;
}

Socket::~Socket() {
  close();
}

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Socket listen_on(const Address& a) {
  AddrInfo ai = resolve(a, true);
  std::string last = "no address";
  for (addrinfo* p = ai.list; p; p = p->ai_next) {
    Socket s(::socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC, p->ai_protocol));
    if (!s.valid()) continue;
    int one = 1;
    setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(s.fd(), p->ai_addr, p->ai_addrlen) == 0 && ::listen(s.fd(), 128) == 0) return s;
    last = err();
  }
  throw PeerError(fmt::format("cannot listen on {}: {}", a.str(), last));
}

int bound_port(const Socket& s) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getsockname(s.fd(), reinterpret_cast<sockaddr*>(&ss), &len) != 0) return -1;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
}

std::optional<Socket> accept_until(const Socket& listener, Clock::time_point deadline) {
  if (!wait_readable(listener.fd(), deadline)) return std::nullopt;
  Socket s(::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC));
  if (!s.valid()) throw PeerError(fmt::format("accept failed: {}", err()));
  no_delay(s.fd());
  return s;
}

Socket connect_until(const Address& a, Clock::time_point deadline) {
  std::string last = "timed out";
  while (Clock::now() < deadline) {
    AddrInfo ai = resolve(a, false);
    for (addrinfo* p = ai.list; p; p = p->ai_next) {
      Socket s(::socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC, p->ai_protocol));
      if (!s.valid()) continue;
      if (::connect(s.fd(), p->ai_addr, p->ai_addrlen) == 0) {
        no_delay(s.fd());
        return s;
      }
      last = err();
    }
    // Rank 0 may not be listening yet: try again shortly.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  throw PeerError(
      fmt::format("could not reach rank 0 at {} ({}); is --dist-init-addr right and "
                  "is node 0 up?",
                  a.str(), last));
}

void send_frame(const Socket& s, const Bytes& b, const std::string& peer) {
  // Header and payload in one buffer, one send: two small writes cost the receiver a second
  // wakeup (with TCP_NODELAY each leaves as its own segment). The copy is a few microseconds.
  Bytes frame(8 + b.size());
  const uint64_t n = b.size();
  for (int i = 0; i < 8; ++i) frame[static_cast<size_t>(i)] = static_cast<uint8_t>(n >> (8 * i));
  std::copy(b.begin(), b.end(), frame.begin() + 8);
  const uint8_t* p = frame.data();
  size_t len = frame.size();
  while (len > 0) {
    const ssize_t k = ::send(s.fd(), p, len, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) throw PeerError(fmt::format("{}: connection lost while sending ({})", peer, err()));
    p += k;
    len -= static_cast<size_t>(k);
  }
}

Bytes recv_frame(const Socket& s, std::optional<Clock::time_point> deadline,
                 const std::string& peer) {
  auto recv_all = [&](uint8_t* p, size_t len) {
    while (len > 0) {
      if (!wait_readable(s.fd(), deadline))
        throw PeerError(fmt::format("{} did not answer within the collective timeout ({} ms)", peer,
                                    collective_timeout().count()));
      const ssize_t k = ::recv(s.fd(), p, len, 0);
      if (k < 0 && errno == EINTR) continue;
      if (k == 0) throw PeerError(fmt::format("{} closed its connection (it exited?)", peer));
      if (k < 0) throw PeerError(fmt::format("{}: connection lost ({})", peer, err()));
      p += k;
      len -= static_cast<size_t>(k);
    }
  };
  uint8_t head[8];
  recv_all(head, 8);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(head[i]) << (8 * i);
  if (n > (uint64_t{1} << 36)) throw PeerError(fmt::format("{} sent a corrupt frame", peer));
  Bytes b(n);
  recv_all(b.data(), n);
  return b;
}

bool peer_closed(const Socket& s) {
  pollfd p{s.fd(), POLLIN, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLERR | POLLHUP)) return true;
  uint8_t c;
  const ssize_t k = ::recv(s.fd(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

}  // namespace tandem::tcp
