// Helpers for the GPU collectives tests: random inputs and their exact sums on the host, a
// second rank as a child process (this binary again, one test, rank 1), and event timing.
#pragma once

#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/init.h"
#include "core/tensor.h"
#include "distributed/socket_group.h"

extern char** environ;

namespace tandem::test {

inline bool has_gpu() {
  static const bool ok = init_backends() && cuda::cuda_backend() != nullptr;
  return ok;
}

inline uint16_t bf16_bits(float f) {  // round to nearest even (inputs are finite)
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
inline float bf16_float(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Rank r's input for call `seed`: n values of magnitude [0.5, 1.5) and random sign (never zero),
// as the bytes of dtype dt (bf16 or f32).
inline Bytes make_input(DType dt, int64_t n, uint64_t seed, int r) {
  std::mt19937_64 g(seed * 1000003u + static_cast<uint64_t>(r));
  std::uniform_real_distribution<float> mag(0.5f, 1.5f);
  Bytes b(static_cast<size_t>(n * dtype_size(dt)));
  for (int64_t i = 0; i < n; ++i) {
    const float v = (g() & 1) ? mag(g) : -mag(g);
    if (dt == DType::BF16) {
      const uint16_t h = bf16_bits(v);
      std::memcpy(b.data() + 2 * i, &h, 2);
    } else {
      std::memcpy(b.data() + 4 * i, &v, 4);
    }
  }
  return b;
}

// The sum over ranks 0..world-1 in rank order, f32 accumulation, one rounding to bf16 at the
// end: what the one-shot kernel computes, bit for bit.
inline Bytes rank_order_sum(DType dt, int64_t n, uint64_t seed, int world) {
  std::vector<float> acc(static_cast<size_t>(n), 0.f);
  for (int r = 0; r < world; ++r) {
    const Bytes in = make_input(dt, n, seed, r);
    for (int64_t i = 0; i < n; ++i) {
      float v;
      if (dt == DType::BF16) {
        uint16_t h;
        std::memcpy(&h, in.data() + 2 * i, 2);
        v = bf16_float(h);
      } else {
        std::memcpy(&v, in.data() + 4 * i, 4);
      }
      acc[static_cast<size_t>(i)] = r == 0 ? v : acc[static_cast<size_t>(i)] + v;
    }
  }
  Bytes out(static_cast<size_t>(n * dtype_size(dt)));
  for (int64_t i = 0; i < n; ++i) {
    if (dt == DType::BF16) {
      const uint16_t h = bf16_bits(acc[static_cast<size_t>(i)]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    } else {
      std::memcpy(out.data() + 4 * i, &acc[static_cast<size_t>(i)], 4);
    }
  }
  return out;
}

inline void upload(Tensor& x, const Bytes& b, cudaStream_t s) {
  ASSERT_EQ(cudaMemcpyAsync(x.raw(), b.data(), b.size(), cudaMemcpyHostToDevice, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
}
inline Bytes download(const Tensor& x, cudaStream_t s) {
  Bytes b(static_cast<size_t>(x.nbytes()));
  EXPECT_EQ(cudaMemcpyAsync(b.data(), x.raw(), b.size(), cudaMemcpyDeviceToHost, s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  return b;
}
// Bit-exact comparison; the message names the first differing element.
inline ::testing::AssertionResult same_bits(const Bytes& got, const Bytes& want, DType dt) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << got.size() << " bytes, expected " << want.size();
  const size_t es = static_cast<size_t>(dtype_size(dt));
  for (size_t i = 0; i < got.size(); i += es) {
    if (std::memcmp(got.data() + i, want.data() + i, es) != 0) {
      float g, w;
      if (dt == DType::BF16) {
        uint16_t a, b;
        std::memcpy(&a, got.data() + i, 2);
        std::memcpy(&b, want.data() + i, 2);
        g = bf16_float(a), w = bf16_float(b);
      } else {
        std::memcpy(&g, got.data() + i, 4);
        std::memcpy(&w, want.data() + i, 4);
      }
      return ::testing::AssertionFailure() << "element " << i / es << " of " << got.size() / es
                                           << ": " << g << ", expected " << w;
    }
  }
  return ::testing::AssertionSuccess();
}

// This rank in a two-process test: 0 unless this process is the child the test spawned.
inline int child_rank() {
  const char* r = std::getenv("TANDEM_DIST_RANK");
  return r ? std::atoi(r) : 0;
}

// Rank 0 of a two-process test: listens on a free port of 127.0.0.1, re-executes this binary
// with only `test` selected and TANDEM_DIST_RANK=1 / TANDEM_DIST_PORT set, and joins the group.
// Rank 1 (the child) joins it. ~TwoProcesses (rank 0) waits for the child and checks its exit.
class TwoProcesses {
 public:
  explicit TwoProcesses(const std::string& test) {
    const auto timeout = std::chrono::seconds(60);
    if (child_rank() == 1) {
      const int port = std::atoi(std::getenv("TANDEM_DIST_PORT"));
      pg_ = SocketGroup::join(1, 2, {"127.0.0.1", port}, timeout);
      return;
    }
    tcp::Socket l = tcp::listen_on({"127.0.0.1", 0});
    const int port = tcp::bound_port(l);
    char exe[4096] = {};
    const ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) throw Error("readlink /proc/self/exe failed");
    std::vector<std::string> env_s;
    for (char** e = environ; *e; ++e) env_s.emplace_back(*e);
    env_s.push_back("TANDEM_DIST_RANK=1");
    env_s.push_back("TANDEM_DIST_PORT=" + std::to_string(port));
    std::vector<char*> envp;
    for (std::string& s : env_s) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string filter = "--gtest_filter=" + test;
    std::string exe_s(exe);
    char* argv[] = {exe_s.data(), filter.data(), nullptr};
    if (posix_spawn(&child_, exe, nullptr, nullptr, argv, envp.data()) != 0)
      throw Error("posix_spawn of rank 1 failed");
    pg_ = SocketGroup::join(0, 2, {"127.0.0.1", port}, timeout, std::move(l));
  }
  ~TwoProcesses() {
    pg_.reset();  // rank 0 gone: a child still waiting on it fails instead of hanging
    if (child_ <= 0) return;
    int status = 0;
    for (int i = 0; i < 600 && waitpid(child_, &status, WNOHANG) == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (waitpid(child_, &status, WNOHANG) == 0) {
      kill(child_, SIGKILL);
      waitpid(child_, &status, 0);
      ADD_FAILURE() << "rank 1 did not finish within 60 s";
      return;
    }
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "rank 1 failed (its gtest output is above), status " << status;
  }
  ProcessGroup& pg() { return *pg_; }
  int rank() const { return pg_->rank(); }

 private:
  std::unique_ptr<SocketGroup> pg_;
  pid_t child_ = -1;
};

// `calls` calls of fn captured on stream s into one graph (captured, not run).
inline cudaGraphExec_t capture_calls(cudaStream_t s, int calls, const std::function<void()>& fn) {
  cudaGraph_t g = nullptr;
  cudaGraphExec_t exec = nullptr;
  EXPECT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  for (int i = 0; i < calls; ++i) fn();
  EXPECT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  EXPECT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
  cudaGraphDestroy(g);
  return exec;
}

// Median over `reps` batches (after one warm-up batch) of a batch's device time on stream s
// over `calls`, in microseconds per call: batch() enqueues `calls` calls on s (one by one, or
// one graph launch).
inline double median_us(cudaStream_t s, int calls, int reps, const std::function<void()>& batch) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  batch();
  cudaStreamSynchronize(s);
  std::vector<double> us;
  for (int r = 0; r < reps; ++r) {
    cudaEventRecord(a, s);
    batch();
    cudaEventRecord(b, s);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    us.push_back(1000.0 * ms / calls);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

// {eager, graph} microseconds per call of fn on s (see median_us); `between` runs before the
// capture and after the timing (a barrier, where ranks must not allocate while peers wait).
inline std::pair<double, double> eager_and_graph_us(cudaStream_t s, int calls, int reps,
                                                    const std::function<void()>& fn,
                                                    const std::function<void()>& between = {}) {
  if (between) between();
  cudaGraphExec_t exec = capture_calls(s, calls, fn);
  if (between) between();
  const double eager = median_us(s, calls, reps, [&] {
    for (int i = 0; i < calls; ++i) fn();
  });
  const double graph = median_us(s, calls, reps, [&] { cudaGraphLaunch(exec, s); });
  cudaStreamSynchronize(s);
  if (between) between();
  cudaGraphExecDestroy(exec);
  return {eager, graph};
}

}  // namespace tandem::test
