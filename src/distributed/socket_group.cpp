#include "distributed/socket_group.h"

#include <sys/socket.h>

#include <cstring>

namespace tandem {

namespace {

constexpr uint32_t kMagic = 0x4d444e54;  // "TNDM"

// Every frame after the handshake starts with the collective it belongs to: ranks that meet in
// different collectives have parted ways, which must be an error, not misread bytes.
constexpr uint8_t kBroadcast = 'B', kGather = 'G';

Bytes tagged(uint8_t tag, const Bytes& b) {
  Bytes out;
  out.reserve(b.size() + 1);
  out.push_back(tag);
  out.insert(out.end(), b.begin(), b.end());
  return out;
}
Bytes untag(uint8_t tag, Bytes b, const std::string& peer) {
  if (b.empty() || b[0] != tag)
    throw PeerError(
        fmt::format("the ranks have parted ways: {} sent a {} where this rank expected a {}", peer,
                    b.empty() ? "nothing" : (b[0] == kBroadcast ? "broadcast" : "all-gather"),
                    tag == kBroadcast ? "broadcast" : "all-gather"));
  b.erase(b.begin());
  return b;
}

void put_u32(Bytes& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
uint32_t get_u32(const Bytes& b, size_t at) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(b.at(at + i)) << (8 * i);
  return v;
}

// The parts of an all-gather in one frame: u32 count, then (u64 length, bytes) per part.
Bytes pack(const std::vector<Bytes>& parts) {
  Bytes out;
  put_u32(out, static_cast<uint32_t>(parts.size()));
  for (const Bytes& p : parts) {
    const uint64_t n = p.size();
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
    out.insert(out.end(), p.begin(), p.end());
  }
  return out;
}
std::vector<Bytes> unpack(const Bytes& b) {
  std::vector<Bytes> parts(get_u32(b, 0));
  size_t at = 4;
  for (Bytes& p : parts) {
    uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(b.at(at + i)) << (8 * i);
    at += 8;
    if (at + n > b.size()) throw PeerError("rank 0 sent a truncated all-gather");
    p.assign(b.begin() + static_cast<int64_t>(at), b.begin() + static_cast<int64_t>(at + n));
    at += n;
  }
  return parts;
}

}  // namespace

std::unique_ptr<SocketGroup> SocketGroup::join(int rank, int world, const tcp::Address& addr,
                                               std::chrono::milliseconds join_timeout,
                                               tcp::Socket listener,
                                               const std::function<void()>& while_waiting) {
  if (world < 1 || rank < 0 || rank >= world)
    throw InvalidArgument(fmt::format("rank {} outside a world of {}", rank, world));
  std::unique_ptr<SocketGroup> g(new SocketGroup(rank, world));
  const auto deadline = tcp::Clock::now() + join_timeout;
  if (rank != 0) {
    tcp::Socket s = tcp::connect_until(addr, deadline);
    Bytes hello;
    put_u32(hello, kMagic);
    put_u32(hello, static_cast<uint32_t>(rank));
    put_u32(hello, static_cast<uint32_t>(world));
    tcp::send_frame(s, hello, "rank 0");
    // Rank 0 answers once everyone has joined (or with the reason it refuses this rank).
    const Bytes ok = tcp::recv_frame(s, deadline, "rank 0 at " + addr.str());
    if (ok.size() < 4 || get_u32(ok, 0) != kMagic)
      throw PeerError(fmt::format("rank 0 at {} refused rank {}: {}", addr.str(), rank,
                                  std::string(ok.begin(), ok.end())));
    g->peers_.push_back(std::move(s));
    return g;
  }
  if (!listener.valid()) listener = tcp::listen_on(addr);
  g->peers_.resize(static_cast<size_t>(world));
  int joined = 1;
  while (joined < world) {
    // Short waits, so that while_waiting can notice a rank that will never come.
    const auto slice = std::min(deadline, tcp::Clock::now() + std::chrono::milliseconds(200));
    std::optional<tcp::Socket> s = tcp::accept_until(listener, slice);
    if (!s && tcp::Clock::now() < deadline) {
      if (while_waiting) while_waiting();
      continue;
    }
    if (!s) {
      std::string missing;
      for (int r = 1; r < world; ++r)
        if (!g->peers_[static_cast<size_t>(r)].valid())
          missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      throw PeerError(fmt::format(
          "rank 0 listening on {}: ranks {} of {} did not join within {} s (check --nnodes, "
          "--node-rank and --dist-init-addr on every node)",
          addr.str(), missing, world, join_timeout.count() / 1000));
    }
    Bytes hello;
    try {
      hello = tcp::recv_frame(*s, deadline, "a joining rank");
    } catch (const PeerError&) {
      continue;  // a stray connection (a port scan, a health check): not a rank
    }
    if (hello.size() != 12 || get_u32(hello, 0) != kMagic) continue;
    const int r = static_cast<int>(get_u32(hello, 4)), w = static_cast<int>(get_u32(hello, 8));
    std::string refuse;
    if (w != world)
      refuse = fmt::format("it expects {} ranks, rank 0 has {}", w, world);
    else if (r <= 0 || r >= world)
      refuse = fmt::format("rank {} is outside [1, {})", r, world);
    else if (g->peers_[static_cast<size_t>(r)].valid())
      refuse = fmt::format("rank {} joined twice", r);
    if (!refuse.empty()) {
      const Bytes why(refuse.begin(), refuse.end());
      tcp::send_frame(*s, why, "a joining rank");
      throw PeerError(fmt::format("rank 0 on {}: {}", addr.str(), refuse));
    }
    g->peers_[static_cast<size_t>(r)] = std::move(*s);
    ++joined;
  }
  Bytes ok;
  put_u32(ok, kMagic);
  for (int r = 1; r < world; ++r)
    tcp::send_frame(g->peers_[static_cast<size_t>(r)], ok, g->peer_name(r));
  return g;
}

SocketGroup::~SocketGroup() = default;

void SocketGroup::throw_if_aborted() const {
  if (!aborted_) return;
  std::lock_guard<std::mutex> g(abort_mu_);
  throw PeerError(abort_reason_);
}

void SocketGroup::broadcast(Bytes& bytes) {
  throw_if_aborted();
  if (rank_ == 0) {
    const Bytes frame = tagged(kBroadcast, bytes);
    for (int r = 1; r < world_; ++r)
      tcp::send_frame(peers_[static_cast<size_t>(r)], frame, peer_name(r));
  } else {
    bytes = untag(kBroadcast, tcp::recv_frame(peers_[0], std::nullopt, "rank 0"), "rank 0");
  }
}

std::vector<Bytes> SocketGroup::all_gather(const Bytes& mine) {
  throw_if_aborted();
  const auto deadline = tcp::Clock::now() + collective_timeout();
  if (rank_ != 0) {
    tcp::send_frame(peers_[0], tagged(kGather, mine), "rank 0");
    return unpack(untag(kGather, tcp::recv_frame(peers_[0], deadline, "rank 0"), "rank 0"));
  }
  std::vector<Bytes> parts(static_cast<size_t>(world_));
  parts[0] = mine;
  for (int r = 1; r < world_; ++r)
    parts[static_cast<size_t>(r)] =
        untag(kGather, tcp::recv_frame(peers_[static_cast<size_t>(r)], deadline, peer_name(r)),
              peer_name(r));
  const Bytes all = tagged(kGather, pack(parts));
  for (int r = 1; r < world_; ++r)
    tcp::send_frame(peers_[static_cast<size_t>(r)], all, peer_name(r));
  return parts;
}

void SocketGroup::check_peers() {
  throw_if_aborted();
  for (int r = 0; r < static_cast<int>(peers_.size()); ++r) {
    const tcp::Socket& s = peers_[static_cast<size_t>(r)];
    if (s.valid() && tcp::peer_closed(s))
      throw PeerError(fmt::format("{} closed its connection (it exited?)",
                                  rank_ == 0 ? peer_name(r) : std::string("rank 0")));
  }
}

void SocketGroup::abort(const std::string& why) {
  {
    std::lock_guard<std::mutex> g(abort_mu_);
    if (aborted_) return;
    abort_reason_ = why;
    aborted_ = true;
  }
  // shutdown() (not close) wakes a thread blocked on the socket without freeing its descriptor.
  for (tcp::Socket& s : peers_)
    if (s.valid()) ::shutdown(s.fd(), SHUT_RDWR);
}

}  // namespace tandem
