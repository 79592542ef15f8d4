// Blocking TCP with deadlines, for the process group's bootstrap and messages: listen, accept,
// connect (retrying until a deadline), and length-prefixed frames. Errors throw PeerError with
// the address or the peer in the message.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "distributed/process_group.h"

namespace tandem::tcp {

using Clock = std::chrono::steady_clock;

struct Address {
  std::string host;
  int port = 0;
  std::string str() const { return host + ":" + std::to_string(port); }
};
// "host:port" (IPv4, a name, or [IPv6]); throws InvalidArgument naming what is wrong.
Address parse_address(const std::string& s);

// A socket that closes itself.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket();
  Socket(Socket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Socket& operator=(Socket&& o) noexcept;
  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void close();

 private:
  int fd_ = -1;
};

// Listens on a (port 0: any free port); bound_port() tells which.
Socket listen_on(const Address& a);
int bound_port(const Socket& s);
// Waits for one connection until the deadline; nullopt when it passes.
std::optional<Socket> accept_until(const Socket& listener, Clock::time_point deadline);
// Connects, retrying while the peer is not up yet, until the deadline (then PeerError naming a).
Socket connect_until(const Address& a, Clock::time_point deadline);

// A frame: u64 length (little-endian) then the bytes. recv_frame waits until the deadline
// (nullopt: forever); PeerError on timeout, a closed connection or a socket error, naming `peer`.
void send_frame(const Socket& s, const Bytes& b, const std::string& peer);
Bytes recv_frame(const Socket& s, std::optional<Clock::time_point> deadline,
                 const std::string& peer);
// Whether the peer has closed the connection (or broken it), without blocking.
bool peer_closed(const Socket& s);

}  // namespace tandem::tcp
