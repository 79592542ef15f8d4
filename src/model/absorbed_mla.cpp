#include "model/absorbed_mla.h"

#include <cstring>

#include "core/error.h"

namespace tandem {

std::pair<Tensor, Tensor> split_kv_b(const Tensor& kv_b, int64_t H, int64_t dn, int64_t dv,
                                     int64_t rkv) {
  TD_CHECK(kv_b.device().is_cpu() && kv_b.dtype() == DType::F32 && kv_b.is_contiguous() &&
               kv_b.numel() == H * (dn + dv) * rkv,
           "split_kv_b: want contiguous host f32 [{}, {}], got {}", H * (dn + dv), rkv, kv_b.str());
  Tensor uk_t = Tensor::empty({H, rkv, dn}, DType::F32);  // [H, rkv, dn]
  Tensor uv = Tensor::empty({H, dv, rkv}, DType::F32);    // [H, dv, rkv]
  const float* kvb = kv_b.data<float>();
  float* ukp = uk_t.data<float>();
  for (int64_t h = 0; h < H; ++h) {
    const float* blk = kvb + h * (dn + dv) * rkv;  // [dn + dv, rkv]
    for (int64_t d = 0; d < dn; ++d)
      for (int64_t r = 0; r < rkv; ++r) ukp[(h * rkv + r) * dn + d] = blk[d * rkv + r];
    std::memcpy(uv.data<float>() + h * dv * rkv, blk + dn * rkv,
                static_cast<size_t>(dv * rkv) * sizeof(float));
  }
  return {uk_t, uv};
}

}  // namespace tandem
