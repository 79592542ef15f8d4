#include "distributed/cpu_collectives.h"

#include <cstring>

namespace tandem {

namespace {

Bytes bytes_of(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.raw());
  return Bytes(p, p + t.nbytes());
}

void need_host_f32(const Tensor& t, const char* op, const char* name) {
  TD_CHECK(t.device().is_cpu() && t.dtype() == DType::F32 && t.is_contiguous(),
           "cpu {}: {} must be a contiguous host f32 tensor, got {}", op, name, t.str());
}

}  // namespace

void CpuCollectives::all_reduce_sum(Tensor& x) {
  need_host_f32(x, "all_reduce_sum", "x");
  const std::vector<Bytes> parts = pg_.all_gather(bytes_of(x));
  const int64_t n = x.numel();
  if (n == 0) return;  // (every rank took part in the gather above)
  float* out = x.data<float>();
  for (size_t r = 0; r < parts.size(); ++r) {
    TD_CHECK(static_cast<int64_t>(parts[r].size()) == n * 4,
             "cpu all_reduce_sum: rank {} sent {} bytes, expected {}", r, parts[r].size(), n * 4);
    const auto* p = reinterpret_cast<const float*>(parts[r].data());
    // Rank order, starting from rank 0's values: the same additions on every rank.
    if (r == 0)
      std::memcpy(out, p, static_cast<size_t>(n) * 4);
    else
      for (int64_t i = 0; i < n; ++i) out[i] += p[i];
  }
}

void CpuCollectives::all_gather_cols(Workspace&, const Tensor& in, Tensor& out) {
  need_host_f32(in, "all_gather_cols", "in");
  need_host_f32(out, "all_gather_cols", "out");
  const int64_t R = in.size(0), C = in.size(1), W = world();
  TD_CHECK(out.size(0) == R && out.size(1) == W * C,
           "cpu all_gather_cols: out must be [{}, {}], got {}", R, W * C, out.str());
  const std::vector<Bytes> parts = pg_.all_gather(bytes_of(in));
  float* o = out.data<float>();
  for (int64_t r = 0; r < W; ++r) {
    const Bytes& p = parts[static_cast<size_t>(r)];
    TD_CHECK(static_cast<int64_t>(p.size()) == R * C * 4,
             "cpu all_gather_cols: rank {} sent {} bytes, expected {}", r, p.size(), R * C * 4);
    const auto* src = reinterpret_cast<const float*>(p.data());
    for (int64_t i = 0; i < R; ++i)
      std::memcpy(o + i * W * C + r * C, src + i * C, static_cast<size_t>(C) * 4);
  }
}

}  // namespace tandem
