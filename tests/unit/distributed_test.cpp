// Process groups (threads and TCP), the CPU collectives, and rank 0's step messages, without a
// model: bootstrap, message order, failures that must surface as errors naming the rank, and
// step messages that rebuild exactly the state a follower needs.
#include <gtest/gtest.h>

#include <thread>

#include "distributed/cpu_collectives.h"
#include "distributed/socket_group.h"
#include "distributed/thread_group.h"
#include "runtime/step_message.h"

namespace tandem {
namespace {

using namespace std::chrono_literals;

// world ranks over loopback TCP, each in a thread; fn(rank, group) runs on every rank.
void with_socket_group(int world, const std::function<void(int, ProcessGroup&)>& fn) {
  tcp::Socket listener = tcp::listen_on({"127.0.0.1", 0});
  const tcp::Address addr{"127.0.0.1", tcp::bound_port(listener)};
  std::vector<std::thread> ts;
  std::vector<std::string> errors(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r)
    ts.emplace_back([&, r] {
      try {
        auto g = r == 0 ? SocketGroup::join(0, world, addr, 10s, std::move(listener))
                        : SocketGroup::join(r, world, addr, 10s);
        fn(r, *g);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : ts) t.join();
  for (int r = 0; r < world; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
}

TEST(SocketGroup, BroadcastAndAllGatherInRankOrder) {
  with_socket_group(4, [](int r, ProcessGroup& g) {
    EXPECT_EQ(g.rank(), r);
    EXPECT_EQ(g.world(), 4);
    for (int round = 0; round < 5; ++round) {
      Bytes b;
      if (r == 0) b = Bytes(static_cast<size_t>(1000 * round + 3), static_cast<uint8_t>(round));
      g.broadcast(b);
      EXPECT_EQ(b.size(), static_cast<size_t>(1000 * round + 3));
      if (!b.empty()) {
        EXPECT_EQ(b.back(), round);
      }
      const auto all = g.all_gather(Bytes(static_cast<size_t>(r + 1), static_cast<uint8_t>(r)));
      ASSERT_EQ(all.size(), 4u);
      for (int k = 0; k < 4; ++k) EXPECT_EQ(all[static_cast<size_t>(k)], Bytes(k + 1, k));
    }
  });
}

TEST(CpuCollectives, SumInRankOrderGivesEveryRankTheSameBits) {
  auto run = [](ProcessGroup& g) {
    CpuCollectives c(g);
    Tensor x = Tensor::empty({3, 5}, DType::F32);
    for (int64_t i = 0; i < x.numel(); ++i)
      x.data<float>()[i] = 0.1f * static_cast<float>(i + 1) * static_cast<float>(g.rank() + 1);
    c.all_reduce_sum(x);
    for (int64_t i = 0; i < x.numel(); ++i) {
      float want = 0;
      for (int r = 0; r < g.world(); ++r) want += 0.1f * static_cast<float>(i + 1) * (r + 1);
      EXPECT_EQ(x.data<float>()[i], want);  // same order of additions: exact
    }
    Tensor in = Tensor::empty({2, 3}, DType::F32),
           out = Tensor::empty({2, 3 * g.world()}, DType::F32);
    for (int64_t i = 0; i < 6; ++i) in.data<float>()[i] = static_cast<float>(100 * g.rank() + i);
    Workspace ws(Device::cpu());
    c.all_gather_cols(ws, in, out);
    for (int64_t row = 0; row < 2; ++row)
      for (int r = 0; r < g.world(); ++r)
        for (int64_t k = 0; k < 3; ++k)
          EXPECT_EQ(out.data<float>()[row * 3 * g.world() + r * 3 + k],
                    static_cast<float>(100 * r + row * 3 + k));
  };
  with_socket_group(3, [&](int, ProcessGroup& g) { run(g); });
  auto groups = ThreadHub::make(3);
  std::vector<std::thread> ts;
  for (auto& g : groups) ts.emplace_back([&, p = g.get()] { run(*p); });
  for (auto& t : ts) t.join();
}

TEST(SocketGroup, JoinFailuresNameTheAddressAndTheMissingRanks) {
  // Nobody listens on this port: the connecting rank gives up at its deadline.
  tcp::Socket probe = tcp::listen_on({"127.0.0.1", 0});
  const int port = tcp::bound_port(probe);
  probe.close();
  try {
    SocketGroup::join(1, 2, {"127.0.0.1", port}, 500ms);
    ADD_FAILURE() << "joined a rank 0 that does not exist";
  } catch (const PeerError& e) {
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(port)), std::string::npos)
        << e.what();
  }
  // Rank 0 alone: ranks 1 and 2 never come.
  try {
    SocketGroup::join(0, 3, {"127.0.0.1", 0}, 300ms);
    ADD_FAILURE() << "rank 0 did not time out";
  } catch (const PeerError& e) {
    EXPECT_NE(std::string(e.what()).find("ranks 1, 2 of 3 did not join"), std::string::npos)
        << e.what();
  }
}

TEST(SocketGroup, AWrongWorldSizeIsRefused) {
  tcp::Socket listener = tcp::listen_on({"127.0.0.1", 0});
  const tcp::Address addr{"127.0.0.1", tcp::bound_port(listener)};
  std::string e0, e1;
  std::thread t0([&] {
    try {
      SocketGroup::join(0, 2, addr, 5s, std::move(listener));
    } catch (const PeerError& e) {
      e0 = e.what();
    }
  });
  try {
    SocketGroup::join(1, 3, addr, 5s);
  } catch (const PeerError& e) {
    e1 = e.what();
  }
  t0.join();
  EXPECT_NE(e0.find("it expects 3 ranks, rank 0 has 2"), std::string::npos) << e0;
  EXPECT_NE(e1.find("refused"), std::string::npos) << e1;
}

TEST(SocketGroup, APeerThatLeavesIsSeenByRankZero) {
  tcp::Socket listener = tcp::listen_on({"127.0.0.1", 0});
  const tcp::Address addr{"127.0.0.1", tcp::bound_port(listener)};
  std::unique_ptr<SocketGroup> g0;
  std::thread t1([&] { SocketGroup::join(1, 2, addr, 5s); });  // joins, then its group is gone
  g0 = SocketGroup::join(0, 2, addr, 5s, std::move(listener));
  t1.join();
  bool seen = false;
  for (int i = 0; i < 100 && !seen; ++i) {
    try {
      g0->check_peers();
      std::this_thread::sleep_for(10ms);
    } catch (const PeerError& e) {
      seen = std::string(e.what()).find("rank 1 closed its connection") != std::string::npos;
    }
  }
  EXPECT_TRUE(seen);
  EXPECT_THROW(g0->all_gather(Bytes{1}), PeerError);
}

TEST(ThreadGroup, ACollectiveTimesOutNamingTheRank) {
  const auto old = collective_timeout();
  set_collective_timeout(200ms);
  auto groups = ThreadHub::make(2);
  try {
    groups[1]->all_gather(Bytes{1});  // rank 0 never comes
    ADD_FAILURE() << "no timeout";
  } catch (const PeerError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1: 1 of 2 ranks"), std::string::npos) << e.what();
  }
  set_collective_timeout(old);
}

// A constraint that records what it accepted; its replica spec names it.
class RecordingConstraint final : public TokenConstraint {
 public:
  explicit RecordingConstraint(std::string name) : name_(std::move(name)) {}
  void fill_mask(uint32_t*, int64_t) override {}
  bool accept(int32_t t) override {
    seen.push_back(t);
    return true;
  }
  void rollback(int64_t n) override { seen.resize(seen.size() - static_cast<size_t>(n)); }
  bool can_terminate() const override { return true; }
  bool is_terminated() const override { return false; }
  std::string replica_spec() const override { return name_; }
  std::vector<int32_t> seen;

 private:
  std::string name_;
};

// Constraints travel once: the first message carrying a constrained sequence brings its replica
// spec and the generated tokens to catch up on; later ones only say it is held; a sequence the
// followers forgot brings it again; a follower without a factory refuses.
TEST(StepMessage, ConstraintsAreReplicatedOnceWithTheirTokens) {
  auto s = std::make_unique<Sequence>();
  s->id = 7;
  s->tokens = {5, 6, 7, 8, 100, 101, 102};
  s->prompt_len = 4;
  s->kv_len = 6;
  s->generated = 3;
  s->prefilled = true;
  s->pages = {0};
  s->req.constraint = std::make_shared<RecordingConstraint>("grammar-A");
  StepPlan dec;
  dec.kind = StepPlan::Kind::kDecode;
  dec.decode = {s.get()};
  std::vector<std::string> built;
  FollowerSequences f([&](const std::string& spec) {
    built.push_back(spec);
    return std::make_shared<RecordingConstraint>(spec);
  });
  ReplicatedConstraints sent;
  const Bytes first = encode_step(dec, {7}, &sent);
  EXPECT_EQ(sent.count(7), 1u);
  const FollowerSequences::Step a = f.apply(first);
  ASSERT_EQ(built, std::vector<std::string>{"grammar-A"});
  auto* copy = dynamic_cast<RecordingConstraint*>(a.plan.decode[0]->req.constraint.get());
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(copy->seen, (std::vector<int32_t>{100, 101, 102}));
  copy->accept(103);  // the follower's own step follows its token
  const Bytes second = encode_step(dec, {7}, &sent);
  EXPECT_LT(second.size(), first.size());
  const FollowerSequences::Step b = f.apply(second);
  EXPECT_EQ(b.plan.decode[0]->req.constraint.get(), copy) << "the same copy, not a new one";
  EXPECT_EQ(built.size(), 1u);
  // Not running for a step: both sides forget, and the next message brings it again.
  StepPlan idle;
  idle.kind = StepPlan::Kind::kPrefill;
  f.apply(encode_step(idle, {}, &sent));
  EXPECT_TRUE(sent.empty());
  f.apply(encode_step(dec, {7}, &sent));
  EXPECT_EQ(built.size(), 2u);
  FollowerSequences no_factory;
  ReplicatedConstraints fresh;
  EXPECT_THROW(no_factory.apply(encode_step(dec, {7}, &fresh)), Error);
}

// A plan of a chunk and two decodes; the follower's sequences hold what the step reads.
TEST(StepMessage, FollowerSequencesHoldWhatTheStepReads) {
  std::vector<std::unique_ptr<Sequence>> seqs;
  for (int i = 0; i < 3; ++i) {
    auto s = std::make_unique<Sequence>();
    s->id = 10 + i;
    for (int t = 0; t < 50 + i; ++t) s->tokens.push_back(1000 * i + t);
    s->prompt_len = 40;
    s->kv_len = 30 + i;
    s->generated = i;
    s->prefilled = i > 0;
    s->pages = {3 * i, 3 * i + 1, 3 * i + 2, 9};
    s->req.max_new_tokens = 77;
    s->req.sampling.temperature = 0.7f;
    s->req.sampling.top_k = 20;
    s->req.sampling.top_p = 0.9f;
    s->req.sampling.seed = 5;
    s->req.stop_token_ids = {2, 3};
    s->req.return_hidden_states = i == 1;
    s->rng = Rng(1234 + i);
    s->rng.next_u64();
    s->next_draft = 42 + i;
    seqs.push_back(std::move(s));
  }
  FollowerSequences f;
  StepPlan plan;
  plan.kind = StepPlan::Kind::kPrefill;
  plan.prefill.push_back({seqs[0].get(), 16, 32});
  plan.fill_draft = false;  // the draft leaves these positions to a catch-up, on every rank
  const FollowerSequences::Step p = f.apply(encode_step(plan, {10, 11, 12}));
  EXPECT_FALSE(p.plan.fill_draft);
  plan.fill_draft = true;
  EXPECT_TRUE(FollowerSequences().apply(encode_step(plan, {10, 11, 12})).plan.fill_draft);
  ASSERT_EQ(p.plan.prefill.size(), 1u);
  const Sequence& a = *p.plan.prefill[0].seq;
  EXPECT_EQ(a.tokens.size(), seqs[0]->tokens.size());
  for (int t = 16; t <= 32; ++t) EXPECT_EQ(a.tokens[t], seqs[0]->tokens[t]);  // the chunk + 1
  EXPECT_EQ(p.plan.prefill[0].start, 16);
  EXPECT_EQ(p.plan.prefill[0].end, 32);
  EXPECT_EQ(f.size(), 1u);

  StepPlan dec;
  dec.kind = StepPlan::Kind::kDecode;
  dec.draft_steps = 3;
  dec.decode = {seqs[1].get(), seqs[2].get()};
  // A speculative round for sequences this rank never drafted for: refused.
  EXPECT_THROW(f.apply(encode_step(dec, {11, 12})), Error);
  FollowerSequences g;
  StepPlan plain = dec;
  plain.draft_steps = 0;
  const FollowerSequences::Step d = g.apply(encode_step(plain, {11, 12}));
  ASSERT_EQ(d.plan.decode.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const Sequence& got = *d.plan.decode[i];
    const Sequence& want = *seqs[i + 1];
    EXPECT_EQ(got.id, want.id);
    EXPECT_EQ(got.tokens.size(), want.tokens.size());
    EXPECT_EQ(got.tokens.back(), want.tokens.back());
    EXPECT_EQ(got.kv_len, want.kv_len);
    EXPECT_EQ(got.generated, want.generated);
    EXPECT_EQ(got.prefilled, want.prefilled);
    EXPECT_EQ(got.pages, want.pages);
    EXPECT_EQ(got.req.max_new_tokens, 77);
    EXPECT_EQ(got.req.sampling.temperature, 0.7f);
    EXPECT_EQ(got.req.sampling.top_k, 20);
    EXPECT_EQ(got.req.stop_token_ids, want.req.stop_token_ids);
    EXPECT_EQ(got.req.return_hidden_states, want.req.return_hidden_states);
    EXPECT_EQ(got.rng.state(), want.rng.state());
    EXPECT_EQ(got.next_draft, want.next_draft);
  }
  // The draft state a step leaves stays with the follower's sequence (it is never sent), and a
  // sequence rank 0 no longer runs is forgotten.
  d.plan.decode[0]->draft_hidden = {1.f, 2.f};
  d.plan.decode[1]->draft_hidden = {3.f};
  const FollowerSequences::Step again = g.apply(encode_step(dec, {11, 12}));
  EXPECT_EQ(again.plan.decode[0]->draft_hidden, (std::vector<float>{1.f, 2.f}));
  StepPlan only12 = dec;
  only12.decode = {seqs[2].get()};
  g.apply(encode_step(only12, {12}));
  EXPECT_EQ(g.size(), 1u);
  EXPECT_EQ(g.find(11), nullptr);
  EXPECT_TRUE(g.apply(encode_stop()).stop);
}

TEST(StepMessage, TruncatedOrCorruptMessagesThrow) {
  StepPlan plan;
  plan.kind = StepPlan::Kind::kDecode;
  Sequence s;
  s.tokens = {1, 2, 3};
  s.pages = {0};
  plan.decode = {&s};
  const Bytes good = encode_step(plan, {0});
  for (size_t n : {size_t{0}, size_t{1}, good.size() / 2, good.size() - 1}) {
    FollowerSequences f;
    const Bytes cut(good.begin(), good.begin() + static_cast<int64_t>(n));
    EXPECT_THROW(f.apply(cut), Error) << "cut at " << n;
  }
  Bytes bad = good;
  bad[0] = 99;
  FollowerSequences f;
  EXPECT_THROW(f.apply(bad), Error);
  EXPECT_THROW(f.apply(encode_step(plan, {5})), Error);  // in the step but not running
}

}  // namespace
}  // namespace tandem
