#include "backends/cuda/cuda_graph.h"

#include <cuda_runtime.h>

#include <algorithm>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernels.h"
#include "core/error.h"

namespace tandem::cuda {

ArenaWorkspace::ArenaWorkspace(Device d, size_t bytes)
    : Workspace(d),
      buf_(Tensor::empty({static_cast<int64_t>(bytes)}, DType::U8, d)),
      bytes_(bytes) {
  TD_CHECK(d.is_cuda(), "ArenaWorkspace is for GPU memory, got {}", d.str());
}

Tensor ArenaWorkspace::alloc(const Shape& shape, DType dtype) {
  const size_t n = static_cast<size_t>(shape.numel() * dtype_size(dtype));
  const size_t at = (used_ + 255) / 256 * 256;
  if (at + n > bytes_)
    fail("arena workspace exhausted: {} bytes for {} {} at offset {} of {} (make the arena larger)",
         n, dtype_name(dtype), shape.str(), at, bytes_);
  used_ = at + n;
  high_ = std::max(high_, used_);
  // A view of the arena buffer: shares (and keeps alive) its storage.
  return Tensor::wrap(static_cast<char*>(buf_.raw()) + at, shape, dtype, device(),
                      std::make_shared<Tensor>(buf_));
}

struct DecodeGraphs::Graph {
  int runs = 0;
  size_t used_after = 0;  // arena offset past the forward's allocations (restored on replay)
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ~Graph() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
  }
};

namespace {
CudaBackend& require(CudaBackend* be) {
  TD_CHECK(be != nullptr, "DecodeGraphs: the CUDA backend is not initialised");
  return *be;
}
}  // namespace

DecodeGraphs::DecodeGraphs(CudaBackend* backend, ArenaWorkspace& ws, GraphOptions o)
    : be_(require(backend)), ws_(ws), opts_(o) {
  cudaStream_t s = nullptr;
  TD_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  stream_ = s;
}

DecodeGraphs::~DecodeGraphs() {
  graphs_.clear();
  if (stream_) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}

void DecodeGraphs::clear() {
  graphs_.clear();
}
size_t DecodeGraphs::num_graphs() const {
  return graphs_.size();
}

bool DecodeGraphs::run(int64_t key, const std::function<void(Workspace&)>& fn) {
  auto s = static_cast<cudaStream_t>(stream_);
  if (opts_.disable_cuda_graph) {
    ws_.reset();
    fn(ws_);
    return true;
  }
  std::unique_ptr<Graph>& g = graphs_[key];
  if (!g) g = std::make_unique<Graph>();
  if (g->runs == 0) {  // eager warm-up on the default stream
    ws_.reset();
    fn(ws_);
    g->used_after = ws_.used();
    ++g->runs;
    return true;
  }
  bool ran = false;
  if (!g->exec) {
    TD_CUDA_CHECK(cudaDeviceSynchronize());
    be_.set_stream(s);
    TD_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    try {
      ws_.reset();
      fn(ws_);
    } catch (...) {
      cudaGraph_t broken = nullptr;
      cudaStreamEndCapture(s, &broken);
      if (broken) cudaGraphDestroy(broken);
      cudaGetLastError();
      be_.set_stream(nullptr);
      throw;
    }
    be_.set_stream(nullptr);
    g->used_after = ws_.used();
    TD_CUDA_CHECK(cudaStreamEndCapture(s, &g->graph));
    TD_CUDA_CHECK(cudaGraphInstantiate(&g->exec, g->graph, 0));
    ran = true;
  }
  // The static inputs were just written on the legacy default stream (Tensor::copy_from, whose
  // device-to-device copies return before they finish, and eager ops such as gather_rows), which
  // a non-blocking stream does not wait for: finish them before the replay reads them.
  TD_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
  TD_CUDA_CHECK(cudaGraphLaunch(g->exec, s));
  TD_CUDA_CHECK(cudaStreamSynchronize(s));
  ws_.set_used(g->used_after);  // later allocations must not overwrite the replayed outputs
  ++g->runs;
  return ran;
}

void fill_random(Tensor& t, uint64_t seed, float scale) {
  TD_CHECK(t.device().is_cuda() && t.is_contiguous(),
           "fill_random: needs a contiguous GPU tensor, got {}", t.str());
  if (t.dtype() == DType::F8_E4M3 || t.dtype() == DType::FP4X2) {
    k::fill_random_codes(static_cast<uint8_t*>(t.raw()), t.numel(), seed, scale,
                         t.dtype() == DType::FP4X2, nullptr);
    TD_CUDA_LAUNCH_CHECK();
    return;
  }
  TD_CHECK(t.dtype() == DType::BF16 || t.dtype() == DType::F32,
           "fill_random: bf16, f32, f8_e4m3 or fp4x2, got {}", t.str());
  k::fill_random(t.raw(), t.numel(), seed, scale,
                 t.dtype() == DType::BF16 ? k::DT::BF16 : k::DT::F32, nullptr);
  TD_CUDA_LAUNCH_CHECK();
}

void synchronize() {
  TD_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace tandem::cuda
