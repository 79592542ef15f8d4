// The FP8 KV cache on CUDA against the CPU backend (docs/kv-cache.md): the latent-row and
// indexer-key stores, the gather that feeds prefill, every decode kernel (16-head mma, 64-head
// mma, SIMT) and the FP8 indexer, on fresh random rows over a sweep of shapes (one token, odd
// lengths, rows on page boundaries, GLM-5.2 dimensions). Both sides read the same FP8 bytes.
#include <cstring>

#include "backends/cuda/cuda_backend.h"
#include "ops/kv_fp8.h"
#include "ops_test_util.h"

namespace tandem::test {
namespace {

constexpr double kAttentionFp8 = 1e-2;  // the bf16 kernels' bound: the rows convert exactly

// [S, latent_row_bytes(n, dr)] FP8 rows of random values (tiles of different magnitudes), the
// same bytes on both devices.
Pair fp8_latent_pool(Rng& rng, int64_t S, int64_t n, int64_t dr) {
  const int64_t RB = kv_fp8::latent_row_bytes(n, dr);
  Tensor h = Tensor::empty({S, RB}, DType::F8_E4M3);
  std::vector<float> row(n + dr);
  for (int64_t s = 0; s < S; ++s) {
    const float mag = 0.25f + static_cast<float>(rng.next_u64() % 8);
    for (int64_t i = 0; i < n + dr; ++i)
      row[i] = mag * static_cast<float>(rng.normal()) * (i < n && (i / 128) % 2 ? 0.1f : 1.0f);
    kv_fp8::quantize_latent_row(row.data(), n, dr, h.data<uint8_t>() + s * RB);
  }
  return {h, h.to(Device::cuda())};
}

// The dequantized rows of an FP8 latent pool, [S, n + dr] f32 (host).
std::vector<float> dequantized(const Tensor& pool, int64_t n, int64_t dr) {
  Tensor h = pool.to(Device::cpu());
  const int64_t S = h.size(0), RB = h.size(1);
  std::vector<float> out(S * (n + dr));
  for (int64_t s = 0; s < S; ++s)
    kv_fp8::dequantize_latent_row(h.data<uint8_t>() + s * RB, n, dr, out.data() + s * (n + dr));
  return out;
}

std::vector<uint8_t> bytes(const Tensor& t) {
  Tensor h = t.to(Device::cpu());
  return {h.data<uint8_t>(), h.data<uint8_t>() + h.numel()};
}

// The fused store into FP8 rows: the GPU normalizes in its own summation order, so an inverse
// norm one ulp away can move a value across an e4m3 rounding boundary; the dequantized rows are
// compared (relative L2, one e4m3 step is 2^-4 relative) and nearly every byte must agree.
TEST_F(CudaOps, MlaKvStoreFp8Rows) {
  for (bool inter : {true, false}) {
    for (int64_t n : {512, 128, 40}) {
      Meta m = make_meta({1, 37, 130}, {1, 5, 17}, 16);
      const int64_t dr = 64, T = m.cpu.num_tokens();
      Pair pool = fp8_latent_pool(rng_, m.slots, n, dr);  // old contents: random, never zeros
      Pair x = rand({T, n + dr + 24}, 2.0f).narrow(1, 8, n + dr);  // strided rows
      Pair w = rand({n}, 1.0f, DType::F32);
      std::vector<float> inv(static_cast<size_t>(dr / 2));
      for (int64_t j = 0; j < dr / 2; ++j)
        inv[static_cast<size_t>(j)] = static_cast<float>(std::pow(1e6, -2.0 * j / dr));
      Tensor invc = Tensor::from_vector(inv, {dr / 2});
      std::vector<int32_t> slots = to_int_vector(m.cpu.slot_mapping);
      const int32_t skipped = slots[1];
      slots[1] = -1;  // a padding token writes nowhere
      m.cpu.slot_mapping = Tensor::from_vector(slots, {T});
      m.gpu.slot_mapping = m.cpu.slot_mapping.to(Device::cuda());
      const std::vector<uint8_t> before = bytes(pool.gpu);
      ops::mla_kv_store(x.gpu, w.gpu, 1e-6f, invc.to(Device::cuda()), RopeParams{inter, 1.1f},
                        m.gpu, pool.gpu);
      ops::mla_kv_store(x.cpu, w.cpu, 1e-6f, invc, RopeParams{inter, 1.1f}, m.cpu, pool.cpu);
      const std::string what =
          std::string(inter ? "interleaved" : "neox") + " n=" + std::to_string(n);
      const CompareResult r = compare(dequantized(pool.gpu, n, dr), dequantized(pool.cpu, n, dr));
      ErrorTable::get().add("mla_kv_store (fp8)", r.rel, 1e-2, r.nan == 0 && r.rel <= 1e-2);
      EXPECT_EQ(r.nan, 0) << what;
      EXPECT_LE(r.rel, 1e-2) << what;
      const std::vector<uint8_t> gb = bytes(pool.gpu), cb = bytes(pool.cpu);
      int64_t differ = 0;
      for (size_t i = 0; i < gb.size(); ++i) differ += gb[i] != cb[i];
      EXPECT_LE(differ, static_cast<int64_t>(gb.size() / 200)) << what << ": bytes differ";
      const int64_t RB = pool.cpu.size(1);
      EXPECT_TRUE(std::equal(before.begin() + skipped * RB, before.begin() + (skipped + 1) * RB,
                             gb.begin() + skipped * RB))
          << what << ": the padding token wrote its slot";
    }
  }
}

// The FP8 indexer-key store: rotation and quantization are the CPU's operations in the CPU's
// order on the same bf16 inputs, so the bytes must be identical.
TEST_F(CudaOps, IndexKeyStoreFp8Bytes) {
  for (int64_t D : {16, 32, 64, 128}) {
    for (int64_t ps : {1, 16, 64}) {
      Meta m = make_meta({1, 37, 130}, {1, 5, 17}, ps);
      const int64_t T = m.cpu.num_tokens();
      Tensor h = Tensor::empty({m.slots, D + 4}, DType::F8_E4M3);
      for (int64_t i = 0; i < h.numel(); ++i)
        h.data<uint8_t>()[i] = static_cast<uint8_t>(rng_.next_u64() % 0x7e);
      Pair pool{h, h.to(Device::cuda())};
      Pair rows = rand({T, D + 8}, 3.0f).narrow(1, 0, D);  // strided rows
      ops::kv_store(rows.gpu, m.gpu, pool.gpu);
      ops::kv_store(rows.cpu, m.cpu, pool.cpu);
      const std::vector<uint8_t> gb = bytes(pool.gpu), cb = bytes(pool.cpu);
      int64_t differ = 0;  // +0 and -0 (0x00, 0x80) are the same value
      for (size_t i = 0; i < gb.size(); ++i)
        differ += gb[i] != cb[i] && !((gb[i] & 0x7f) == 0 && (cb[i] & 0x7f) == 0 &&
                                      static_cast<int64_t>(i % (D + 4)) < D);
      ErrorTable::get().add("kv_store (fp8 keys)", static_cast<double>(differ), 0, differ == 0);
      EXPECT_EQ(differ, 0) << "D=" << D << " page " << ps << ": bytes differ";
    }
  }
}

// Prefill reads the FP8 rows through the gather, dequantized into bf16 exactly.
TEST_F(CudaOps, KvGatherFp8Dequantizes) {
  for (int64_t ps : {1, 16, 64}) {
    for (int64_t n : {512, 32}) {
      const int64_t dr = n == 512 ? 64 : 8;
      Meta m = make_meta({1, 37, 130, 64}, {1, 5, 17, 1}, ps);
      Pair pool = fp8_latent_pool(rng_, m.slots, n, dr);
      const int64_t total = 1 + 37 + 130 + 64;
      expect_close(ops::kv_gather_fp8(gpu_ws_, pool.gpu, m.gpu, total, n, dr, DType::BF16),
                   ops::kv_gather_fp8(cpu_ws_, pool.cpu, m.cpu, total, n, dr, DType::F32), 0,
                   "kv_gather (fp8)", "n=" + std::to_string(n) + " page " + std::to_string(ps));
    }
  }
}

std::vector<int32_t> sparse_rows(Rng& rng, const std::vector<int32_t>& pos_of, int64_t K) {
  std::vector<int32_t> out;
  for (int32_t pos : pos_of) {
    std::vector<int32_t> row;
    for (int64_t k = 0; k < K; ++k)
      row.push_back(k <= pos ? static_cast<int32_t>(rng.next_u64() % (pos + 1)) : -1);
    std::sort(row.begin(), row.end());
    row.erase(std::unique(row.begin(), row.end()), row.end());
    row.resize(K, -1);
    std::sort(row.begin(), row.end(), [](int32_t a, int32_t b) {
      return (a < 0) != (b < 0) ? a >= 0 : a < b;  // valid ascending, then the -1 padding
    });
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

// Every decode kernel reading FP8 rows against the CPU's FP8 path.
TEST_F(CudaOps, MlaDecodeFp8AllKernels) {
  struct Case {
    std::vector<int32_t> lens, q;
    int64_t H, L, Lc, K, ps;  // K = 0: dense
  };
  const std::vector<Case> cases = {
      {{1}, {1}, 4, 40, 32, 0, 16},                           // one token, one key
      {{1, 9, 23}, {1, 3, 5}, 4, 40, 32, 0, 4},               // tiny golden dims, partial tile
      {{16, 17, 33}, {1, 2, 3}, 5, 144, 128, 0, 16},          // page boundaries, odd heads
      {{300}, {1}, 5, 144, 128, 8, 16},                       // sparse, batch 1
      {{4100, 37}, {2, 3}, 64, 576, 512, 0, 64},              // GLM-5.2 dims, dense, past 2048
      {{9000}, {1}, 64, 576, 512, 0, 64},                     // batch 1, long: many splits
      {{5000, 2500, 17}, {1, 2, 1}, 64, 576, 512, 2048, 64},  // top-2048 sparse
      {{700, 90, 1501}, {4, 4, 4}, 64, 576, 512, 0, 64},      // verify: 4 query tokens each
  };
  for (const Case& c : cases) {
    if (small_only() && c.H == 64) continue;
    Meta m = make_meta(c.lens, c.q, c.ps);
    const int64_t T = m.cpu.num_tokens();
    Pair pool = fp8_latent_pool(rng_, m.slots, c.Lc, c.L - c.Lc);
    Pair q = rand({T, c.H, c.L}, 0.5f);
    Pair topk;
    if (c.K) topk = ints(sparse_rows(rng_, m.pos_of, c.K), {T, c.K});
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.L));
    const std::string what = "H=" + std::to_string(c.H) + " L=" + std::to_string(c.L) +
                             " len0=" + std::to_string(c.lens[0]) + (c.K ? " sparse" : " dense");
    const Tensor want = ops::mla_decode(cpu_ws_, q.cpu, pool.cpu, m.cpu, topk.cpu, scale, c.Lc);
    const char* names[] = {"mla_decode fp8 (mma)", "mla_decode fp8 (mma 64h)",
                           "mla_decode fp8 (simt)"};
    const MlaKernel kernels[] = {MlaKernel::kMma16, MlaKernel::kMma64, MlaKernel::kSimt};
    for (int kernel = 0; kernel < 3; ++kernel) {
      if (kernel == 1 && !(c.H == 64 && c.Lc == 512)) continue;  // the 64-head kernel's dims
      use_mla_kernel(kernels[kernel]);
      expect_close(ops::mla_decode(gpu_ws_, q.gpu, pool.gpu, m.gpu, topk.gpu, scale, c.Lc), want,
                   kAttentionFp8, names[kernel], what);
    }
    use_automatic_mla_kernel();
  }
}

// The FP8 indexer computes the CPU's scores bit for bit (see indexer.cu), so the selection must
// match exactly, ties included: mode 1 plants exact ties (every key one of 5 rows), which put
// the K-th place inside a tie group; the earlier positions must win on both.
TEST_F(CudaOps, IndexerFp8ExactSelectionAndTies) {
  struct Case {
    std::vector<int32_t> lens, q;
    int64_t Hi, Di, K;
    int mode;  // 0 random keys, 1 every key one of 5 rows (planted ties)
  };
  const std::vector<Case> cases = {
      {{3, 30, 50}, {3, 6, 50}, 16, 16, 8, 0},           // tiny golden dims, prefill-like
      {{3, 30, 50}, {3, 6, 50}, 16, 16, 8, 1},           // tiny, planted ties
      {{65, 129}, {1, 64}, 4, 32, 64, 0},                // austen dims, odd head count
      {{5000, 2100, 100}, {2, 1, 1}, 32, 128, 2048, 0},  // GLM-5.2 dims
      {{2600, 70}, {2, 2}, 32, 128, 2048, 1},            // planted ties at GLM-5.2 dims
      {{700}, {1}, 64, 128, 256, 0},                     // DeepSeek-V3.2: 64 index heads
  };
  for (const Case& c : cases) {
    if (small_only() && c.Di == 128) continue;
    Meta m = make_meta(c.lens, c.q, 64);
    const int64_t T = m.cpu.num_tokens(), RB = c.Di + 4;
    Tensor h = Tensor::empty({m.slots, RB}, DType::F8_E4M3);
    Tensor keys = rand({m.slots, c.Di}, 2.0f).cpu;  // [S, Di]
    for (int64_t s = 0; s < m.slots; ++s) {
      const int64_t src = c.mode == 1 ? (s * 7) % 5 : s;
      kv_fp8::quantize_index_row(keys.data<float>() + src * c.Di, c.Di, h.data<uint8_t>() + s * RB);
    }
    Pair pool{h, h.to(Device::cuda())};
    Pair q = rand({T, c.Hi, c.Di});
    Pair w = rand({T, c.Hi}, 0.2f, DType::F32);
    const std::string what = "Hi=" + std::to_string(c.Hi) + " Di=" + std::to_string(c.Di) +
                             " K=" + std::to_string(c.K) + (c.mode ? " planted ties" : "");
    const Tensor want = ops::indexer_topk(cpu_ws_, q.cpu, w.cpu, pool.cpu, m.cpu, c.K);
    for (bool tc : {true, false}) {  // the FP8 scores ignore the switch; both must agree
      cuda::cuda_backend()->set_mla_tensor_cores(tc);
      expect_equal_ints(ops::indexer_topk(gpu_ws_, q.gpu, w.gpu, pool.gpu, m.gpu, c.K), want,
                        "indexer_topk (fp8)", what);
    }
    cuda::cuda_backend()->set_mla_tensor_cores(true);
  }
}

}  // namespace
}  // namespace tandem::test
