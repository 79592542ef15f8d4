// Shared by the tests of the kernels for quantized weights (cuda_quant_test.cpp,
// cuda_quant_moe_test.cpp): a host implementation of the numerics contract
// (docs/quantization.md) written from the contract's text, random quantized weights with
// realistic scales (never zeros), device buffers poisoned before use, routing, and the backend
// fixture that compares the CUDA backend's paths against the CPU backend.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/quant_kernels.h"
#include "backends/init.h"
#include "core/tensor.h"
#include "ops/backend.h"
#include "ops/weight.h"

namespace tandem::quant_test {

namespace k = cuda::k;

// ---- host side of the contract -----------------------------------------------------------------

inline float bf16_round(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  b += 0x7fffu + ((b >> 16) & 1u);
  b &= 0xffff0000u;
  std::memcpy(&v, &b, 4);
  return v;
}
inline uint16_t bf16_bits(float v) {
  v = bf16_round(v);
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return static_cast<uint16_t>(b >> 16);
}
inline float bf16_value(uint16_t h) {
  const uint32_t b = static_cast<uint32_t>(h) << 16;
  float v;
  std::memcpy(&v, &b, 4);
  return v;
}

inline float e4m3_decode(uint8_t c) {
  const int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
  const float mag = e == 0 ? std::ldexp(static_cast<float>(m), -9)
                           : std::ldexp(1.0f + static_cast<float>(m) / 8.0f, e - 7);
  return s ? -mag : mag;
}
inline float e4m3_value(uint8_t c) {
  static const std::vector<float> table = [] {
    std::vector<float> t(256);
    for (int i = 0; i < 256; ++i) t[i] = e4m3_decode(static_cast<uint8_t>(i));
    return t;
  }();
  return table[c];
}

// e4m3 of v, nearest even, saturating at +-448 (codes 0x00 .. 0x7e by magnitude).
inline uint8_t e4m3_code(float v) {
  const float a = std::fabs(v);
  uint8_t best = 0;
  if (a >= 448.0f) {
    best = 0x7e;
  } else {
    for (uint8_t c = 1; c <= 0x7e; ++c) {
      const float lo = e4m3_value(static_cast<uint8_t>(c - 1)), hi = e4m3_value(c);
      if (a <= hi) {
        const float dl = a - lo, dh = hi - a;
        best = dl < dh ? c - 1 : dh < dl ? c : ((c - 1) % 2 == 0 ? c - 1 : c);
        break;
      }
    }
  }
  return static_cast<uint8_t>(best | (std::signbit(v) ? 0x80 : 0));
}

inline float e2m1_value(uint8_t nib) {
  static const float mag[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
  return nib & 8 ? -mag[nib & 7] : mag[nib & 7];
}

// kFp8Group for one row: q (e4m3 values as floats) and the group scales.
inline void act_quant_fp8_ref(const float* x, int64_t K, int64_t bk, bool ue8m0, float* q,
                              float* s) {
  const int64_t g = std::min(bk, K), kb = (K + g - 1) / g;
  for (int64_t b = 0; b < kb; ++b) {
    float amax = 0.f;
    for (int64_t i = b * g; i < std::min(K, (b + 1) * g); ++i)
      amax = std::max(amax, std::fabs(x[i]));
    float sc = std::max(amax, 1e-4f) / 448.0f;
    if (ue8m0) sc = std::exp2(std::ceil(std::log2(static_cast<double>(sc))));
    s[b] = sc;
    for (int64_t i = b * g; i < std::min(K, (b + 1) * g); ++i)
      q[i] = e4m3_value(e4m3_code(x[i] / sc));
  }
}

// kMxfp4 quantize-dequantize of one row (K a multiple of 32).
inline void act_qdq_mxfp4_ref(const float* x, int64_t K, float* out) {
  for (int64_t g = 0; g < K; g += 32) {
    float amax = 0.f;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[g + i]));
    const int e =
        amax > 0.f ? static_cast<int>(std::floor(std::log2(static_cast<double>(amax)))) - 2 : 0;
    for (int i = 0; i < 32; ++i) {
      const float v = std::ldexp(x[g + i], -e), a = std::fabs(v);
      float q = 6.f;  // nearest on the e2m1 grid, ties to the even code
      static const float grid[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
      for (int c = 0; c < 7; ++c) {
        const float mid = 0.5f * (grid[c] + grid[c + 1]);
        if (a < mid || (a == mid && c % 2 == 0)) {
          q = grid[c];
          break;
        }
      }
      out[g + i] = std::copysign(std::ldexp(q, e), v);
    }
  }
}

// ---- test data
// -----------------------------------------------------------------------------------

struct Rng {
  std::mt19937_64 g{1234};
  float normal() { return std::normal_distribution<float>(0.f, 1.f)(g); }
  float uniform(float a, float b) { return std::uniform_real_distribution<float>(a, b)(g); }
  int64_t below(int64_t n) { return static_cast<int64_t>(g() % static_cast<uint64_t>(n)); }
};

// Activations: bf16 values around 1 with a few outliers per row (what sets a group's amax).
inline std::vector<float> activations(Rng& r, int64_t M, int64_t K) {
  std::vector<float> x(static_cast<size_t>(M * K));
  for (auto& v : x) {
    v = r.normal();
    if (r.below(64) == 0) v *= 8.f;
    if (v == 0.f) v = 0.5f;
    v = bf16_round(v);
  }
  return x;
}

// An FP8 block weight: e4m3 codes of N(0, 1) * 64 (the spread of a real checkpoint's codes)
// and scales of about 1e-2 / 64 per block; scale rows padded to a multiple of 4 like the CUDA
// backend's.
struct Fp8Host {
  int64_t E = 1, N = 0, K = 0, bn = 128, bk = 128, nb = 0, kb = 0, s_rs = 0;
  std::vector<uint8_t> w;  // [E, N, K]
  std::vector<float> s;    // [E, nb, s_rs]
  float wv(int64_t e, int64_t n, int64_t kk) const {
    return e4m3_value(w[static_cast<size_t>((e * N + n) * K + kk)]);
  }
  float sv(int64_t e, int64_t n, int64_t b) const {
    return s[static_cast<size_t>((e * nb + n / bn) * s_rs + b)];
  }
};
inline Fp8Host make_fp8(Rng& r, int64_t E, int64_t N, int64_t K, int64_t bn, int64_t bk) {
  Fp8Host h;
  h.E = E, h.N = N, h.K = K, h.bn = bn, h.bk = std::min(bk, K);
  h.nb = (N + bn - 1) / bn;
  h.kb = (K + h.bk - 1) / h.bk;
  h.s_rs = (h.kb + 3) / 4 * 4;
  h.w.resize(static_cast<size_t>(E * N * K));
  for (auto& c : h.w) {
    c = e4m3_code(r.normal() * 64.f);
    if ((c & 0x7f) == 0) c = 0x08;  // never zero
  }
  h.s.assign(static_cast<size_t>(E * h.nb * h.s_rs), -1.f);  // padding: poison
  for (int64_t e = 0; e < E; ++e)
    for (int64_t n = 0; n < h.nb; ++n)
      for (int64_t b = 0; b < h.kb; ++b)
        h.s[static_cast<size_t>((e * h.nb + n) * h.s_rs + b)] = r.uniform(0.5f, 2.f) * 1.5e-4f;
  return h;
}

// An MXFP4 weight: random e2m1 codes (no zero bytes) and e8m0 scales 2^-9 .. 2^-5.
struct Mx4Host {
  int64_t E = 1, N = 0, K = 0, s_rs = 0;
  std::vector<uint8_t> w;  // [E, N, K / 2]
  std::vector<uint8_t> s;  // [E, N, s_rs]
  std::vector<float> deq;  // [E, N, K] dequantized (the reference's operand)
  float wv(int64_t e, int64_t n, int64_t kk) const {
    return deq[static_cast<size_t>((e * N + n) * K + kk)];
  }
  float decode(int64_t e, int64_t n, int64_t kk) const {
    const uint8_t b = w[static_cast<size_t>((e * N + n) * (K / 2) + kk / 2)];
    const float sc = std::ldexp(1.0f, s[static_cast<size_t>((e * N + n) * s_rs + kk / 32)] - 127);
    return e2m1_value(kk % 2 ? b >> 4 : b & 15) * sc;
  }
};
inline Mx4Host make_mx4(Rng& r, int64_t E, int64_t N, int64_t K) {
  Mx4Host h;
  h.E = E, h.N = N, h.K = K, h.s_rs = K / 32 + (K / 32) % 2;  // odd counts padded: stride honoured
  h.w.resize(static_cast<size_t>(E * N * K / 2));
  for (auto& b : h.w) {
    b = static_cast<uint8_t>(r.below(256));
    if (b == 0) b = 0x21;
  }
  h.s.assign(static_cast<size_t>(E * N * h.s_rs), 0xff);
  for (int64_t e = 0; e < E; ++e)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t g = 0; g < K / 32; ++g)
        h.s[static_cast<size_t>((e * N + n) * h.s_rs + g)] = static_cast<uint8_t>(118 + r.below(5));
  h.deq.resize(static_cast<size_t>(E * N * K));
  for (int64_t e = 0; e < E; ++e)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t kk = 0; kk < K; ++kk)
        h.deq[static_cast<size_t>((e * N + n) * K + kk)] = h.decode(e, n, kk);
  return h;
}

// ---- device buffers
// ------------------------------------------------------------------------------

template <typename T>
struct Dev {
  T* p = nullptr;
  size_t n = 0;
  explicit Dev(size_t count) : n(count) {
    EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(1, n) * sizeof(T)), cudaSuccess);
    cudaMemset(p, 0xff, std::max<size_t>(1, n) * sizeof(T));  // NaN / poison
  }
  explicit Dev(const std::vector<T>& v) : Dev(v.size()) {
    cudaMemcpy(p, v.data(), n * sizeof(T), cudaMemcpyHostToDevice);
  }
  ~Dev() { cudaFree(p); }
  Dev(const Dev&) = delete;
  std::vector<T> get() const {
    std::vector<T> v(n);
    cudaDeviceSynchronize();
    cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost);
    return v;
  }
};

inline std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> o(v.size());
  for (size_t i = 0; i < v.size(); ++i) o[i] = bf16_bits(v[i]);
  return o;
}
inline std::vector<float> from_bf16(const std::vector<uint16_t>& v) {
  std::vector<float> o(v.size());
  for (size_t i = 0; i < v.size(); ++i) o[i] = bf16_value(v[i]);
  return o;
}

// ||a - b|| / ||b||; NaN anywhere fails.
inline double rel_err(const std::vector<float>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    if (std::isnan(a[i])) return INFINITY;
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

class CudaQuant : public ::testing::Test {
 protected:
  void SetUp() override {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) GTEST_SKIP() << "no CUDA device";
    cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, 0);
  }
  int sms_ = 0;
  Rng rng_;
};

inline k::Fp8W fp8_view(const Fp8Host& h, const Dev<uint8_t>& w, const Dev<float>& s) {
  k::Fp8W v;
  v.w = w.p, v.s = s.p, v.s_rs = h.s_rs, v.bn = h.bn, v.bk = h.bk, v.N = h.N, v.K = h.K;
  v.w_es = h.N * h.K, v.s_es = h.nb * h.s_rs;
  return v;
}
inline k::Mx4W mx4_view(const Mx4Host& h, const Dev<uint8_t>& w, const Dev<uint8_t>& s) {
  k::Mx4W v;
  v.w = w.p, v.s = s.p, v.s_rs = h.s_rs, v.N = h.N, v.K = h.K;
  v.w_es = h.N * h.K / 2, v.s_es = h.N * h.s_rs;
  return v;
}

// Host reference of the FP8 product: out[m, n] over quantized activations.
inline std::vector<double> fp8_ref(const Fp8Host& w, int64_t e, const std::vector<float>& q,
                                   const std::vector<float>& s, int64_t M) {
  std::vector<double> out(static_cast<size_t>(M * w.N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < w.N; ++n) {
      double acc = 0;
      for (int64_t b = 0; b < w.kb; ++b) {
        double dot = 0;
        for (int64_t kk = b * w.bk; kk < std::min(w.K, (b + 1) * w.bk); ++kk)
          dot += static_cast<double>(w.wv(e, n, kk)) * q[static_cast<size_t>(m * w.K + kk)];
        acc += dot * w.sv(e, n, b) * s[static_cast<size_t>(m * w.kb + b)];
      }
      out[static_cast<size_t>(m * w.N + n)] = acc;
    }
  return out;
}

inline std::vector<double> mx4_ref(const Mx4Host& w, int64_t e, const std::vector<float>& x,
                                   int64_t M) {
  std::vector<double> out(static_cast<size_t>(M * w.N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < w.N; ++n) {
      double acc = 0;
      for (int64_t kk = 0; kk < w.K; ++kk)
        acc += static_cast<double>(w.wv(e, n, kk)) * x[static_cast<size_t>(m * w.K + kk)];
      out[static_cast<size_t>(m * w.N + n)] = acc;
    }
  return out;
}

// TANDEM_OPS_SMALL=1 (the compute-sanitizer runs of scripts/gpu_suite.sh): a few small cases.
inline bool small_only() {
  const char* e = std::getenv("TANDEM_OPS_SMALL");
  return e && *e && *e != '0';
}
inline std::vector<int64_t> rows_to_test() {
  if (small_only()) return {1, 17, 65};
  return {1, 3, 4, 17, 64, 65, 300};
}

// ---- activation quantization
// ---------------------------------------------------------------------

struct Routing {
  std::vector<int32_t> idx;  // [T, k]
  std::vector<float> w;      // [T, k]
};
// Distinct experts per token from the first E - 2 (the last two never get a token).
inline Routing route(Rng& r, int64_t T, int64_t kk, int64_t E) {
  Routing ro;
  for (int64_t t = 0; t < T; ++t) {
    std::vector<int32_t> pick;
    while (static_cast<int64_t>(pick.size()) < kk) {
      const int32_t e = static_cast<int32_t>(r.below(E - 2));
      if (std::find(pick.begin(), pick.end(), e) == pick.end()) pick.push_back(e);
    }
    for (int32_t e : pick) ro.idx.push_back(e), ro.w.push_back(r.uniform(0.05f, 0.5f));
  }
  return ro;
}

// Grouping buffers of moe_prepare for P pairs over E experts.
struct Groups {
  Dev<int32_t> counts, offsets, perm, inv, active, num;
  Groups(int64_t P, int64_t E) : counts(E), offsets(E + 1), perm(P), inv(P), active(E), num(1) {}
  k::MoeGroups view(int64_t P, int64_t E, int64_t kk) const {
    k::MoeGroups g;
    g.counts = counts.p, g.offsets = offsets.p, g.perm = perm.p, g.active = active.p;
    g.num_active = num.p, g.max_active = std::min(E, P), g.k = kk, g.pairs = P;
    return g;
  }
};

inline float silu(float v) {
  return v / (1.0f + std::exp(-v));
}

// ---- the backend's paths (linear, moe_experts), against the CPU backend
// --------------------------

inline Tensor upload(const void* host, size_t bytes, const Shape& shape, DType dt,
                     Device d = Device::cuda()) {
  Tensor t = Tensor::empty(shape, dt, d);
  if (d.is_cpu())
    std::memcpy(t.raw(), host, bytes);
  else
    cudaMemcpy(t.raw(), host, bytes, cudaMemcpyHostToDevice);
  return t;
}
// The same quantized weight on either device (scale rows padded, the view narrowed to kb).
inline Weight fp8_weight(const Fp8Host& h, bool experts, Device d = Device::cuda()) {
  Weight w;
  const Shape ws = experts ? Shape{h.E, h.N, h.K} : Shape{h.N, h.K};
  const Shape ss = experts ? Shape{h.E, h.nb, h.s_rs} : Shape{h.nb, h.s_rs};
  w.w = upload(h.w.data(), h.w.size(), ws, DType::F8_E4M3, d);
  w.scale = upload(h.s.data(), h.s.size() * 4, ss, DType::F32, d).narrow(experts ? 2 : 1, 0, h.kb);
  w.format = WeightFormat::kFp8Block;
  w.block_n = h.bn, w.block_k = h.bk;
  w.act = ActQuant::kFp8Group;
  return w;
}
inline Weight mx4_weight(const Mx4Host& h, bool experts, ActQuant act, Device d = Device::cuda()) {
  Weight w;
  const Shape ws = experts ? Shape{h.E, h.N, h.K / 2} : Shape{h.N, h.K / 2};
  const Shape ss = experts ? Shape{h.E, h.N, h.s_rs} : Shape{h.N, h.s_rs};
  w.w = upload(h.w.data(), h.w.size(), ws, DType::FP4X2, d);
  w.scale = upload(h.s.data(), h.s.size(), ss, DType::E8M0, d).narrow(experts ? 2 : 1, 0, h.K / 32);
  w.format = WeightFormat::kMxfp4;
  w.block_n = 1, w.block_k = 32;
  w.act = act;
  return w;
}
inline std::vector<float> bf16_rows(const Tensor& t) {
  std::vector<uint16_t> v(static_cast<size_t>(t.numel()));
  cudaDeviceSynchronize();
  cudaMemcpy(v.data(), t.raw(), v.size() * 2, cudaMemcpyDeviceToHost);
  return from_bf16(v);
}
inline std::vector<double> f32_rows(const Tensor& t) {
  const float* p = t.data<float>();
  return std::vector<double>(p, p + t.numel());
}
inline std::vector<double> to_double(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

class CudaQuantBackend : public CudaQuant {
 protected:
  void SetUp() override {
    CudaQuant::SetUp();
    if (IsSkipped()) return;
    ASSERT_TRUE(init_backends());
    be_ = cuda::cuda_backend();
    ASSERT_NE(be_, nullptr);
    moe_fp8_wgmma_before_ = be_->moe_fp8_wgmma();
    fp8_linear_wgmma_before_ = be_->fp8_linear_wgmma();
  }
  void TearDown() override {
    if (!be_) return;
    be_->set_deterministic(false);
    be_->set_moe_fp8_wgmma(moe_fp8_wgmma_before_);  // a test's choices end with it
    be_->set_fp8_linear_wgmma(fp8_linear_wgmma_before_);
  }
  int moe_fp8_wgmma_before_ = -1, fp8_linear_wgmma_before_ = -1;
  cuda::CudaBackend* be_ = nullptr;
  Backend& cpu() { return backend_for(Device::cpu()); }
};

}  // namespace tandem::quant_test
