// Sampling with temperature, top-k and top-p from one uniform number per row: the rule of
// Backend::sample, implemented once in ops/sample_rule.h (the runtime's host sampler uses it
// too); the CUDA kernel reproduces it.
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_math.h"
#include "ops/sample_rule.h"

namespace tandem::cpu {

void CpuBackend::sample(const Tensor& logits, const Tensor& temperature, const Tensor& top_k,
                        const Tensor& top_p, const Tensor& u, Tensor& out) {
  const int64_t T = logits.size(0), V = logits.size(1);
  const float* l = f32_ptr(logits, "sample");
  const float* temp = f32_ptr(temperature, "sample");
  const float* tp = f32_ptr(top_p, "sample");
  const float* uu = f32_ptr(u, "sample");
  const int32_t* tk = top_k.data<int32_t>();
  int32_t* o = out.data<int32_t>();
  ops::SampleKeptSet scratch;
  for (int64_t t = 0; t < T; ++t)
    o[t] = ops::sample_row(l + t * logits.stride(0), V, temp[t], tk[t], tp[t],
                           static_cast<double>(uu[t]), scratch);
}

}  // namespace tandem::cpu
