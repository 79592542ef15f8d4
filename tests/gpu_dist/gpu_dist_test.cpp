// The GPU collectives (distributed/nccl_collectives, one_shot_all_reduce) on one GPU:
//   - NCCL at world 1: all_reduce_sum and all_gather_cols give the input back, eager and inside
//     captured CUDA graphs (DecodeGraphs, as the runtime captures decode steps);
//   - the one-shot all-reduce with 2 ranks on the same GPU, as two threads of this process and
//     as two processes (this binary runs itself again as rank 1, joined over TCP on 127.0.0.1;
//     the buffers cross processes through CUDA IPC, the real mechanism): bf16 and f32, 1 element
//     to 1 MB including odd and unaligned sizes, eager and replayed graphs, every bit compared
//     with the host's rank-order sum;
//   - failure handling: a one-shot call whose peer never comes times out on the device and the
//     watchdog reports it by name; abort() tears down and later calls throw PeerError.
// NCCL refuses two ranks on one GPU, so NCCL itself is only tested at world 1 here.
#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <mutex>

#include "backends/cuda/cuda_graph.h"
#include "dist_test_util.h"
#include "distributed/collective_watchdog.h"
#include "distributed/nccl_collectives.h"
#include "distributed/one_shot_all_reduce.h"
#include "distributed/thread_group.h"

namespace tandem::test {
namespace {

struct Case {
  DType dt;
  int64_t n;
  bool unaligned;  // x starts one element past a 16-byte boundary
};

// 1 element to 1 MB: decode-step sizes (12 KB, 48 KB), odd counts that leave partial vectors,
// a size that does not divide into the kernel's blocks evenly, the 1 MB cap, unaligned views.
std::vector<Case> cases() {
  std::vector<Case> c;
  for (DType dt : {DType::BF16, DType::F32}) {
    const int64_t es = dtype_size(dt);
    for (int64_t bytes : {1024, 12288, 49152, 1 << 20}) c.push_back({dt, bytes / es, false});
    for (int64_t n : {1, 7, 333, 4097, 100003}) c.push_back({dt, n, false});
    c.push_back({dt, 4097, true});
    c.push_back({dt, 6144, true});
  }
  return c;
}

constexpr size_t kMaxBytes = 1 << 20;

using Reduce = std::function<void(Tensor&, cudaStream_t)>;

// Every case through `reduce` on this rank: two eager calls, then (graphs) one call captured
// and replayed three times with fresh inputs at the same address. Each call's inputs are new
// random values; the result must equal the host's rank-order sum bit for bit on every rank.
// `x_pool` is [kMaxBytes + 64] bytes on the GPU, allocated before any rank's first call (see
// OneShotThreads for why).
void check_cases(int rank, int world, cudaStream_t s, const Reduce& reduce, const Tensor& x_pool,
                 bool graphs) {
  const auto all = cases();
  for (size_t ci = 0; ci < all.size(); ++ci) {
    const Case& c = all[ci];
    const int64_t es = dtype_size(c.dt);
    char* base = static_cast<char*>(x_pool.raw()) + (c.unaligned ? es : 0);
    Tensor x = Tensor::wrap(base, {c.n}, c.dt, x_pool.device());
    const std::string what = std::string(dtype_name(c.dt)) + "[" + std::to_string(c.n) + "]" +
                             (c.unaligned ? " unaligned" : "");
    for (int k = 0; k < 2; ++k) {
      const uint64_t seed = ci * 10 + static_cast<uint64_t>(k);
      upload(x, make_input(c.dt, c.n, seed, rank), s);
      reduce(x, s);
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
      ASSERT_TRUE(same_bits(download(x, s), rank_order_sum(c.dt, c.n, seed, world), c.dt))
          << what << ", eager call " << k << ", rank " << rank;
    }
    if (!graphs) continue;
    cudaGraph_t g = nullptr;
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    reduce(x, s);
    ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
    ASSERT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
    for (int k = 2; k < 5; ++k) {
      const uint64_t seed = ci * 10 + static_cast<uint64_t>(k);
      upload(x, make_input(c.dt, c.n, seed, rank), s);
      ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
      ASSERT_TRUE(same_bits(download(x, s), rank_order_sum(c.dt, c.n, seed, world), c.dt))
          << what << ", graph replay " << k - 2 << ", rank " << rank;
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(g);
  }
}

class GpuDist : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!has_gpu()) GTEST_SKIP() << "no CUDA device";
    // A broken protocol should fail the test in seconds, not hang it for the default 300.
    set_collective_timeout(std::chrono::seconds(20));
  }
};

// ---- NCCL at world 1 ----------------------------------------------------------------------

TEST_F(GpuDist, NcclWorldOneGivesInputBack) {
  auto groups = ThreadHub::make(1);
  NcclCollectives coll(*groups[0], Device::cuda(0), {.one_shot_max_bytes = kMaxBytes});
  ASSERT_TRUE(coll.one_shot_available());
  cudaStream_t s = nullptr;  // the backend's stream (legacy default, as eager forwards run)
  Tensor pool = Tensor::empty({static_cast<int64_t>(kMaxBytes + 64)}, DType::U8, Device::cuda());
  // The paths by name (all_reduce_sum itself does nothing at world 1: checked below).
  check_cases(
      0, 1, s, [&](Tensor& x, cudaStream_t) { coll.all_reduce_nccl(x); }, pool, false);
  check_cases(
      0, 1, s, [&](Tensor& x, cudaStream_t) { coll.all_reduce_one_shot(x); }, pool, false);
  Tensor x = Tensor::wrap(pool.raw(), {1000}, DType::BF16, Device::cuda());
  upload(x, make_input(DType::BF16, 1000, 7, 0), s);
  coll.all_reduce_sum(x);
  EXPECT_TRUE(same_bits(download(x, s), make_input(DType::BF16, 1000, 7, 0), DType::BF16));

  // all_gather_cols: one row (straight into out) and several (scratch + 2-D copies).
  Workspace ws(Device::cuda());
  for (int64_t R : {1, 5}) {
    for (DType dt : {DType::BF16, DType::F32}) {
      const int64_t C = 771;
      Tensor in = Tensor::empty({R, C}, dt, Device::cuda());
      Tensor out = Tensor::empty({R, C}, dt, Device::cuda());
      const Bytes data = make_input(dt, R * C, 11 + R, 0);
      upload(in, data, s);
      upload(out, make_input(dt, R * C, 99, 0), s);  // poison: must be overwritten
      coll.all_gather_cols(ws, in, out);
      EXPECT_TRUE(same_bits(download(out, s), data, dt)) << "R " << R;
    }
  }
}

TEST_F(GpuDist, NcclWorldOneInsideCapturedGraphs) {
  auto groups = ThreadHub::make(1);
  NcclCollectives coll(*groups[0], Device::cuda(0));
  cuda::ArenaWorkspace ws(Device::cuda(), 16 << 20);
  cuda::DecodeGraphs graphs(cuda::cuda_backend(), ws);
  const int64_t R = 4, C = 1536;  // a decode step's hidden rows, bf16: 12 KB
  Tensor h = Tensor::empty({R, C}, DType::BF16, Device::cuda());
  Tensor f = Tensor::empty({R, C}, DType::F32, Device::cuda());
  Tensor in = Tensor::empty({R, C}, DType::BF16, Device::cuda());
  Tensor out = Tensor::empty({R, C}, DType::BF16, Device::cuda());
  // Run 0 eager, run 1 captures and replays, runs 2-4 replay only: fresh inputs every time.
  for (int run = 0; run < 5; ++run) {
    const Bytes hb = make_input(DType::BF16, R * C, 100 + run, 0);
    const Bytes fb = make_input(DType::F32, R * C, 200 + run, 0);
    const Bytes ib = make_input(DType::BF16, R * C, 300 + run, 0);
    upload(h, hb, nullptr);
    upload(f, fb, nullptr);
    upload(in, ib, nullptr);
    const bool ran = graphs.run(1, [&](Workspace& w) {
      coll.all_reduce_one_shot(h);
      coll.all_reduce_nccl(f);
      coll.all_reduce_sum(h);
      coll.all_gather_cols(w, in, out);
    });
    EXPECT_EQ(ran, run < 2) << "run " << run;
    EXPECT_TRUE(same_bits(download(h, nullptr), hb, DType::BF16)) << "run " << run;
    EXPECT_TRUE(same_bits(download(f, nullptr), fb, DType::F32)) << "run " << run;
    EXPECT_TRUE(same_bits(download(out, nullptr), ib, DType::BF16)) << "run " << run;
  }
  coll.check();
}

// ---- The one-shot all-reduce, 2 ranks on one GPU ------------------------------------------

// Two threads of this process, one CUDA context: both kernels are resident at once, as on two
// GPUs. Nothing may allocate or free device memory while a peer's kernel waits (that can
// synchronize the device, and the waiting kernel waits for this thread): buffers are made
// before the first call and freed after a final barrier.
TEST_F(GpuDist, OneShotThreads) {
  auto groups = ThreadHub::make(2);
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; ++r)
    ts.emplace_back([&, r] {
      ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
      cudaStream_t s = nullptr;
      ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
      Tensor pool =
          Tensor::empty({static_cast<int64_t>(kMaxBytes + 64)}, DType::U8, Device::cuda());
      {
        OneShotAllReduce ar(*groups[r], 0, kMaxBytes);
        ASSERT_TRUE(ar.available()) << ar.unavailable_reason();
        check_cases(
            r, 2, s, [&](Tensor& x, cudaStream_t st) { ar.run(x, st); }, pool, false);
        cudaStreamSynchronize(s);
        groups[r]->all_gather({});  // both done before either frees
      }
      cudaStreamDestroy(s);
    });
  for (auto& t : ts) t.join();
}

// Two processes on one GPU through CUDA IPC. Their contexts time-slice the GPU, so each call
// waits for the other process's turn: correct, slow (see LatencyTable).
TEST_F(GpuDist, OneShotTwoProcesses) {
  TwoProcesses tp("GpuDist.OneShotTwoProcesses");
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  Tensor pool = Tensor::empty({static_cast<int64_t>(kMaxBytes + 64)}, DType::U8, Device::cuda());
  OneShotAllReduce ar(tp.pg(), 0, kMaxBytes);
  ASSERT_TRUE(ar.available()) << ar.unavailable_reason();
  check_cases(
      tp.rank(), 2, s, [&](Tensor& x, cudaStream_t st) { ar.run(x, st); }, pool, true);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  tp.pg().all_gather({});
  cudaStreamDestroy(s);
}

// ---- Failures -----------------------------------------------------------------------------

// Rank 1 never calls: rank 0's kernel gives up after the collective timeout instead of hanging
// the GPU, and the watchdog's probe reports it, naming the rank it waited for.
TEST_F(GpuDist, OneShotPeerThatNeverComesTimesOut) {
  set_collective_timeout(std::chrono::seconds(2));
  auto groups = ThreadHub::make(2);
  // Rank 1 sets up, then waits off the process group (whose own timeout is the same 2 s).
  std::atomic<bool> done{false};
  std::thread t1([&] {
    OneShotAllReduce ar(*groups[1], 0, kMaxBytes);
    while (!done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  });
  OneShotAllReduce ar0(*groups[0], 0, kMaxBytes);
  std::mutex mu;
  std::string heard;
  CollectiveWatchdog wd(
      0, [&] { return ar0.failure(); },
      [&](const std::string& why) {
        std::lock_guard<std::mutex> l(mu);
        heard = why;
      });
  Tensor x = Tensor::empty({1024}, DType::F32, Device::cuda());
  upload(x, make_input(DType::F32, 1024, 1, 0), nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  ar0.run(x, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // returns: the kernel gave up
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(secs, 1.5);
  EXPECT_LT(secs, 10);
  const std::string want = "the one-shot all-reduce timed out after 2 s waiting for rank 1";
  EXPECT_EQ(ar0.failure(), want);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a watchdog poll or two
  {
    std::lock_guard<std::mutex> l(mu);
    EXPECT_EQ(heard, want);
  }
  done.store(true);
  t1.join();
}

// An eagerly enqueued collective that does not complete within the timeout (here the stream is
// held by a host callback that sleeps) is reported with its name and size.
TEST_F(GpuDist, WatchdogReportsOverdueCollective) {
  set_collective_timeout(std::chrono::seconds(1));
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  std::mutex mu;
  std::string heard;
  {
    CollectiveWatchdog wd(0, nullptr, [&](const std::string& why) {
      std::lock_guard<std::mutex> l(mu);
      heard = why;
    });
    ASSERT_EQ(cudaLaunchHostFunc(
                  s, [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(2500)); },
                  nullptr),
              cudaSuccess);
    wd.enqueued(s, "all_reduce_sum (test)", 4096);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  }
  EXPECT_NE(heard.find("all_reduce_sum (test) of 4096 bytes has not completed after 1 s"),
            std::string::npos)
      << heard;
  cudaStreamDestroy(s);
}

TEST_F(GpuDist, AbortMakesLaterCallsThrow) {
  auto groups = ThreadHub::make(1);
  NcclCollectives coll(*groups[0], Device::cuda(0));
  std::string heard;
  coll.set_on_failure([&](const std::string& why) { heard = why; });
  Tensor x = Tensor::empty({64}, DType::F32, Device::cuda());
  upload(x, make_input(DType::F32, 64, 1, 0), nullptr);
  coll.all_reduce_nccl(x);
  coll.abort("rank 1 went away (test)");
  EXPECT_EQ(heard, "rank 0: rank 1 went away (test)");
  EXPECT_THROW(coll.all_reduce_nccl(x), PeerError);
  EXPECT_THROW(coll.check(), PeerError);
  try {
    coll.all_reduce_sum(x);
    ADD_FAILURE() << "no throw";
  } catch (const PeerError& e) {
    EXPECT_EQ(std::string(e.what()), "rank 0: rank 1 went away (test)");
  }
}

}  // namespace
}  // namespace tandem::test
