// What rank 0 pays to send a step to the other ranks (one process per rank, TCP through rank 0):
// encode the plan + broadcast + the followers' decode, for decode steps of B sequences at GLM-5
// context lengths, over loopback with world 2, 4 and 8 (threads standing in for the processes).
// Ceiling: the step itself. A GLM-5.2 decode step on 8 H200s takes ~10-25 ms (docs/benchmarks.md
// extrapolation), so the row's time is printed as a share of 10 ms.
#include <chrono>
#include <cstdio>
#include <thread>

#include "distributed/socket_group.h"
#include "runtime/step_message.h"

using namespace tandem;
using Clock = std::chrono::steady_clock;

#ifndef BATCHES
#define BATCHES \
  { 1, 8, 32, 64 }
#endif
int main() {
  std::printf("%-6s %-5s %-10s %10s %12s %12s %10s\n", "world", "B", "context", "bytes",
              "encode us", "step msg us", "% of 10ms");
  for (int world : {2, 4, 8})
    for (int B : BATCHES) {
      const int64_t context = 8192, page = 64;
      std::vector<std::unique_ptr<Sequence>> seqs;
      StepPlan plan;
      plan.kind = StepPlan::Kind::kDecode;
      plan.draft_steps = 0;  // (a speculative step needs draft state: same size otherwise)
      std::vector<uint64_t> running;
      for (int b = 0; b < B; ++b) {
        auto s = std::make_unique<Sequence>();
        s->id = static_cast<uint64_t>(b + 1);
        s->tokens.assign(static_cast<size_t>(context), 7);
        s->kv_len = context - 1;
        s->prefilled = true;
        for (int64_t p = 0; p < (context + page) / page; ++p)
          s->pages.push_back(static_cast<int32_t>(p));
        plan.decode.push_back(s.get());
        running.push_back(s->id);
        seqs.push_back(std::move(s));
      }
      tcp::Socket listener = tcp::listen_on({"127.0.0.1", 0});
      const tcp::Address addr{"127.0.0.1", tcp::bound_port(listener)};
      constexpr int kWarmup = 50, kSteps = 300;  // warm-up steps: connection slow start
      std::vector<std::thread> followers;
      for (int r = 1; r < world; ++r)
        followers.emplace_back([&, r] {
          auto g = SocketGroup::join(r, world, addr, std::chrono::seconds(10));
          FollowerSequences seqs;
          for (int i = 0; i < kWarmup + kSteps; ++i) {
            Bytes b;
            g->broadcast(b);
            seqs.apply(b);
            g->all_gather(Bytes{1});  // the step's end: rank 0 times until every rank has it
          }
        });
      auto g0 = SocketGroup::join(0, world, addr, std::chrono::seconds(10), std::move(listener));
      double enc = 0, total = 0;
      size_t bytes = 0;
      for (int i = 0; i < kWarmup + kSteps; ++i) {
        if (i == kWarmup) enc = total = 0;
        const auto t0 = Clock::now();
        Bytes msg = encode_step(plan, running);
        const auto t1 = Clock::now();
        bytes = msg.size();
        g0->broadcast(msg);
        g0->all_gather(Bytes{1});
        const auto t2 = Clock::now();
        enc += std::chrono::duration<double, std::micro>(t1 - t0).count();
        total += std::chrono::duration<double, std::micro>(t2 - t0).count();
      }
      for (auto& t : followers) t.join();
      std::printf("%-6d %-5d %-10lld %10zu %12.1f %12.1f %10.2f\n", world, B,
                  static_cast<long long>(context), bytes, enc / kSteps, total / kSteps,
                  total / kSteps / 100.0);
    }
  std::printf(
      "(step msg: encode + broadcast + every rank decoded and answered, loopback TCP; the\n"
      " answer's round trip is included, so this overstates the one-way cost)\n");
  return 0;
}
