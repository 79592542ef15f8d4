#include "model/online_quant.h"

#include <cstring>
#include <tuple>

#include "core/error.h"
#include "model/random_checkpoint.h"

namespace tandem {

namespace {

// Quantizes one [N, K] matrix; returns {w, scale} as the checkpoint writer would store them.
std::pair<Tensor, Tensor> quantize_2d(const Tensor& w, const QuantScheme& q) {
  if (q.format == WeightFormat::kFp8Block) return quantize_fp8_block(w, q.block_n, q.block_k);
  auto [p, s] = quantize_mxfp4(w, q.block_k);
  return {Tensor::wrap(p.raw(), p.shape(), DType::FP4X2, Device::cpu()).clone(),
          Tensor::wrap(s.raw(), s.shape(), DType::E8M0, Device::cpu()).clone()};
}

// Stacks equally shaped host tensors along a new leading axis.
Tensor stack(const std::vector<Tensor>& parts) {
  std::vector<int64_t> shape = parts[0].shape().vec();
  shape.insert(shape.begin(), static_cast<int64_t>(parts.size()));
  Tensor out = Tensor::empty(Shape(shape), parts[0].dtype());
  auto* dst = static_cast<uint8_t*>(out.raw());
  for (const Tensor& p : parts) {
    std::memcpy(dst, p.raw(), static_cast<size_t>(p.nbytes()));
    dst += p.nbytes();
  }
  return out;
}

}  // namespace

Weight quantize_weight(const Tensor& f32, const QuantScheme& q) {
  TD_CHECK(f32.dtype() == DType::F32 && f32.device().is_cpu() && f32.is_contiguous(),
           "quantize_weight wants a contiguous host f32 tensor, got {}", f32.str());
  TD_CHECK(f32.ndim() == 2 || f32.ndim() == 3, "quantize_weight wants [N, K] or [E, N, K], got {}",
           f32.str());
  Weight w;
  if (q.format == WeightFormat::kDense) {
    w.w = f32;
    return w;
  }
  TD_CHECK(q.block_n > 0 && q.block_k > 0, "quantize_weight: scheme '{}' has no block size",
           q.rule);
  w.format = q.format;
  w.block_n = q.block_n;
  w.block_k = q.block_k;
  if (f32.ndim() == 2) {
    std::tie(w.w, w.scale) = quantize_2d(f32, q);
    return w;
  }
  const int64_t E = f32.size(0);
  std::vector<Tensor> ws, ss;
  for (int64_t e = 0; e < E; ++e) {
    auto [qw, qs] = quantize_2d(f32.select(0, e), q);  // expert e: [N, K]
    ws.push_back(qw);
    ss.push_back(qs);
  }
  w.w = stack(ws);
  w.scale = stack(ss);
  return w;
}

}  // namespace tandem
