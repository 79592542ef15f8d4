// What the runtime needs to replay decode steps as CUDA graphs (host-only header: no CUDA types).
//
//   ArenaWorkspace ws(Device::cuda(), 1 << 30);
//   DecodeGraphs graphs(cuda_backend(), ws);  // or (cuda_backend(), ws, {.disable_cuda_graph =
//   true}) ForwardResult out;                  // lives across calls
//   // static_batch: a ForwardBatch whose device tensors are allocated once per bucket; before
//   // each step the runtime copies the step's ids/positions/slots/page table into them.
//   graphs.run(bucket, [&](Workspace& w) { out = model.forward(w, static_batch, cache); });
//   // out.logits now holds this step's logits (a replay rewrites the same addresses).
//
// The first run() of a bucket runs eagerly (it sizes the backend's scratch and picks the GEMM
// algorithms), the second captures the forward into a graph and replays it, later ones only
// replay: the callback is not called, so everything the forward reads must sit at the
// addresses it had when captured (the static batch, the KV pools, the weights) and host-side
// values baked into the capture (token count, AttentionMeta::max_seq_len, page_size) must not
// change within a bucket. Kernels read real sequence lengths and positions from the device, so
// a bucket captured with max_seq_len = its capacity serves any shorter context.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>

#include "core/tensor.h"
#include "ops/workspace.h"

namespace tandem::cuda {

class CudaBackend;

// A bump allocator over one device buffer: alloc() hands out consecutive 256-byte-aligned
// slices; reset() starts over, so a forward that allocates the same shapes in the same order
// gets the same addresses every time. Running out throws (with the size needed).
class ArenaWorkspace final : public Workspace {
 public:
  ArenaWorkspace(Device d, size_t bytes);
  Tensor alloc(const Shape& shape, DType dtype) override;
  void reset() override { used_ = 0; }
  size_t mark() const override { return used_; }
  void release(size_t mark) override { used_ = mark < used_ ? mark : used_; }
  void set_used(size_t n) { used_ = n; }
  size_t used() const { return used_; }
  size_t high_water() const { return high_; }
  size_t capacity() const { return bytes_; }

 private:
  Tensor buf_;
  size_t bytes_ = 0, used_ = 0, high_ = 0;
};

struct GraphOptions {
  bool disable_cuda_graph = false;  // run() always runs the callback eagerly
};

// Captures and replays through `backend`: during a capture it points the backend's launches at
// the graphs' private stream (CudaBackend::set_stream) and back to the default stream after.
class DecodeGraphs {
 public:
  // backend: the CUDA backend whose ops the forwards run (cuda_backend()); must not be null and
  // must outlive this object.
  DecodeGraphs(CudaBackend* backend, ArenaWorkspace& ws, GraphOptions o = {});
  ~DecodeGraphs();
  DecodeGraphs(const DecodeGraphs&) = delete;
  DecodeGraphs& operator=(const DecodeGraphs&) = delete;

  // Runs (or replays) the forward of bucket `key` and waits for it. Returns true when fn ran
  // (eager warm-up, capture, or graphs disabled), false for a pure replay.
  bool run(int64_t key, const std::function<void(Workspace&)>& fn);
  // Drops every captured graph (e.g. after the KV pools or weights moved).
  void clear();
  size_t num_graphs() const;
  bool disabled() const { return opts_.disable_cuda_graph; }

 private:
  struct Graph;
  CudaBackend& be_;
  ArenaWorkspace& ws_;
  GraphOptions opts_;
  void* stream_ = nullptr;  // cudaStream_t used for capture and replay
  std::map<int64_t, std::unique_ptr<Graph>> graphs_;
};

// Fills a bf16 or f32 GPU tensor (contiguous) with deterministic random values of standard
// deviation `scale` (benchmarks' dummy weights, tests' poison-free inputs).
void fill_random(Tensor& t, uint64_t seed, float scale);
// Waits for all GPU work; rethrows an asynchronous kernel fault as tandem::Error.
void synchronize();

}  // namespace tandem::cuda
