// Latency of one bf16 all-reduce: the one-shot kernel against NCCL at 12 KB and 48 KB (a decode
// step's hidden states) and 1.5 MB (a prefill chunk's), launched one by one (eager) and replayed
// from a captured graph (as decode runs). Prints a table (the LATENCY lines).
//
// This runs on ONE GPU: world 2 is two ranks sharing it, not two GPUs over NVLink.
//   threads:   two threads of one process, one CUDA context: both kernels run at once, so the
//              time is the kernel's own cost with the peer's data in local memory;
//   processes: two processes (CUDA IPC, the real mechanism): their contexts time-slice the GPU,
//              so a call waits for the other process's turn; this measures the scheduler.
// NCCL refuses two ranks on one GPU, so it has only world-1 numbers (the row says so).
#include <gtest/gtest.h>

#include <cstdio>

#include "dist_test_util.h"
#include "distributed/nccl_collectives.h"
#include "distributed/one_shot_all_reduce.h"
#include "distributed/thread_group.h"

namespace tandem::test {
namespace {

constexpr size_t kMaxBytes = 2 << 20;
const int64_t kSizes[] = {12 << 10, 48 << 10, 1536 << 10};

struct Row {
  std::string world;
  int64_t bytes;
  double one_eager = -1, one_graph = -1, nccl_eager = -1, nccl_graph = -1;
};

std::string cell(double us) {
  char b[32];
  if (us < 0) return "n/a";
  std::snprintf(b, sizeof b, "%.1f", us);
  return b;
}

void print(const std::vector<Row>& rows, const std::string& nccl_note) {
  std::printf(
      "LATENCY bf16 all-reduce, us per call (median); world 2 = two ranks on ONE GPU, "
      "not NVLink\n");
  std::printf("LATENCY %-22s %8s %12s %12s %12s %12s\n", "world", "bytes", "1shot-eager",
              "1shot-graph", "nccl-eager", "nccl-graph");
  for (const Row& r : rows)
    std::printf("LATENCY %-22s %8lld %12s %12s %12s %12s\n", r.world.c_str(),
                static_cast<long long>(r.bytes), cell(r.one_eager).c_str(),
                cell(r.one_graph).c_str(), cell(r.nccl_eager).c_str(), cell(r.nccl_graph).c_str());
  if (!nccl_note.empty()) std::printf("LATENCY note: %s\n", nccl_note.c_str());
  std::fflush(stdout);
}

Tensor random_bf16(int64_t n, cudaStream_t s) {
  Tensor x = Tensor::empty({n}, DType::BF16, Device::cuda());
  upload(x, make_input(DType::BF16, n, static_cast<uint64_t>(n), 0), s);
  return x;
}

// World 1: NcclCollectives' two paths, on the backend's stream pointed at s.
void world_one(std::vector<Row>& rows) {
  auto groups = ThreadHub::make(1);
  NcclCollectives coll(*groups[0], Device::cuda(0), {.one_shot_max_bytes = kMaxBytes});
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  cuda::cuda_backend()->set_stream(s);
  for (int64_t bytes : kSizes) {
    Tensor x = random_bf16(bytes / 2, s);
    Row r{"1", bytes};
    std::tie(r.one_eager, r.one_graph) =
        eager_and_graph_us(s, 50, 5, [&] { coll.all_reduce_one_shot(x); });
    std::tie(r.nccl_eager, r.nccl_graph) =
        eager_and_graph_us(s, 50, 5, [&] { coll.all_reduce_nccl(x); });
    rows.push_back(r);
  }
  cuda::cuda_backend()->set_stream(nullptr);
  cudaStreamDestroy(s);
}

// World 2 as two threads: every buffer exists before the first call, and graphs are captured
// and destroyed between barriers, because allocating or freeing while the peer's kernel waits
// for this thread could synchronize the device and deadlock.
void world_two_threads(std::vector<Row>& rows) {
  auto groups = ThreadHub::make(2);
  std::vector<Row> mine[2];
  std::vector<std::thread> ts;
  for (int rank = 0; rank < 2; ++rank)
    ts.emplace_back([&, rank] {
      ProcessGroup& pg = *groups[rank];
      cudaSetDevice(0);
      cudaStream_t s = nullptr;
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
      std::vector<Tensor> xs;
      for (int64_t bytes : kSizes) xs.push_back(random_bf16(bytes / 2, s));
      {
        OneShotAllReduce ar(pg, 0, kMaxBytes);
        for (size_t i = 0; i < xs.size(); ++i) {
          Row r{"2 (threads, 1 GPU)", kSizes[i]};
          std::tie(r.one_eager, r.one_graph) = eager_and_graph_us(
              s, 50, 5, [&] { ar.run(xs[i], s); }, [&] { pg.all_gather({}); });
          mine[rank].push_back(r);
        }
        cudaStreamSynchronize(s);
        pg.all_gather({});
      }
      cudaStreamDestroy(s);
    });
  for (auto& t : ts) t.join();
  rows.insert(rows.end(), mine[0].begin(), mine[0].end());
}

TEST(GpuDistLatency, Table) {
  if (!has_gpu()) GTEST_SKIP() << "no CUDA device";
  set_collective_timeout(std::chrono::seconds(30));
  std::vector<Row> rows;
  if (child_rank() == 0) {
    world_one(rows);
    world_two_threads(rows);
  }
  // World 2 as two processes (this binary again as rank 1).
  std::string nccl_note;
  {
    TwoProcesses tp("GpuDistLatency.Table");
    cudaStream_t s = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    {
      OneShotAllReduce ar(tp.pg(), 0, kMaxBytes);
      ASSERT_TRUE(ar.available()) << ar.unavailable_reason();
      for (int64_t bytes : kSizes) {
        Tensor x = random_bf16(bytes / 2, s);
        Row r{"2 (processes, 1 GPU)", bytes};
        std::tie(r.one_eager, r.one_graph) = eager_and_graph_us(
            s, 10, 3, [&] { ar.run(x, s); }, [&] { tp.pg().all_gather({}); });
        rows.push_back(r);
      }
      cudaStreamSynchronize(s);
      tp.pg().all_gather({});
    }
    // NCCL at world 2 on one GPU: expected to be refused; say what it said.
    try {
      NcclCollectives coll(tp.pg(), Device::cuda(0), {.one_shot_max_bytes = 0, .watchdog = false});
      nccl_note = "NCCL accepted two ranks on one GPU (not timed)";
    } catch (const Error& e) {
      nccl_note = std::string("NCCL at world 2 on one GPU: ") + e.what();
    }
    cudaStreamDestroy(s);
  }
  if (child_rank() == 0) print(rows, nccl_note);
}

}  // namespace
}  // namespace tandem::test
