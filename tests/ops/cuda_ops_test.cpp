// Every CUDA op against the CPU backend on fresh random inputs (never zeros) over a sweep of
// shapes: batch 1, odd sizes, strided views, partially filled pages, contexts past index_topk,
// and real GLM-5.2 dimensions (576/512 latent rows, 64 heads, indexer 32 x 128, top-k 2048).
// Outputs are poisoned before each op; NaN never passes. Floating outputs use a relative L2
// error with a per-op threshold suited to bf16; index outputs must match exactly.
#include <cstring>
#include <set>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/heuristics.h"
#include "backends/cuda/kernels.h"
#include "ops_test_util.h"

namespace tandem::test {
namespace {

constexpr double kBf16Out = 5e-3;  // one bf16 rounding of the output
constexpr double kF32Out = 1e-4;   // bf16 inputs, f32 accumulation and output
constexpr double kAttention = 1e-2;
constexpr double kMoe = 1.5e-2;  // bf16 intermediate h as well

TEST_F(CudaOps, EmbeddingNormsAndElementwise) {
  for (int64_t T : {1, 7}) {
    Pair table = rand({1000, 640});
    std::vector<int32_t> ids;
    for (int64_t t = 0; t < T; ++t) ids.push_back(static_cast<int32_t>(rng_.next_u64() % 1000));
    Pair id = ints(ids);
    expect_close(ops::embedding(gpu_ws_, id.gpu, table.gpu),
                 ops::embedding(cpu_ws_, id.cpu, table.cpu), 0, "embedding",
                 "T=" + std::to_string(T));
    // A vocab-parallel shard: rows [300, 550) of the vocabulary, zero rows for the rest.
    Pair shard = rand({250, 640});
    expect_close(ops::embedding(gpu_ws_, id.gpu, shard.gpu, 300, true),
                 ops::embedding(cpu_ws_, id.cpu, shard.cpu, 300, true), 0, "embedding shard",
                 "T=" + std::to_string(T));
  }
  for (int64_t T : {1, 3, 17}) {
    // rms_norm: 64, 1536 and 4104 / 6144 hold the row in registers (1, 2, up to 4 vectors per
    // thread; 4104 leaves threads idle), 16384 loops, 130 takes the scalar kernel.
    for (int64_t D : {64, 130, 1536, 4104, 6144, 16384}) {
      Pair big = rand({T, D + 8}, 2.0f);
      Pair x = big.narrow(1, 8, D);  // strided rows
      Pair w = rand({D}, 1.0f, DType::F32), b = rand({D}, 0.5f, DType::F32);
      const std::string what = "T=" + std::to_string(T) + " D=" + std::to_string(D);
      expect_close(ops::rms_norm(gpu_ws_, x.gpu, w.gpu, 1e-6f),
                   ops::rms_norm(cpu_ws_, x.cpu, w.cpu, 1e-6f), kBf16Out, "rms_norm", what);
      expect_close(ops::layer_norm(gpu_ws_, x.gpu, w.gpu, b.gpu, 1e-6f),
                   ops::layer_norm(cpu_ws_, x.cpu, w.cpu, b.cpu, 1e-6f), kBf16Out, "layer_norm",
                   what);
      {  // the fused residual add + norm: against the CPU, and bit for bit the two GPU ops
        Pair h = rand({T, D}, 2.0f), d = rand({T, D}, 2.0f);
        Tensor hg = h.gpu.clone(), hc = h.cpu.clone(), h2 = h.gpu.clone();
        const Tensor og = ops::add_rms_norm(gpu_ws_, hg, d.gpu, w.gpu, 1e-6f);
        const Tensor oc = ops::add_rms_norm(cpu_ws_, hc, d.cpu, w.cpu, 1e-6f);
        expect_close(hg, hc, kBf16Out, "add_rms_norm h", what);
        expect_close(og, oc, kBf16Out, "add_rms_norm", what);
        ops::add_inplace(h2, d.gpu);
        const Tensor o2 = ops::rms_norm(gpu_ws_, h2, w.gpu, 1e-6f);
        EXPECT_EQ(to_float_vector(hg), to_float_vector(h2)) << "add_rms_norm h " << what;
        EXPECT_EQ(to_float_vector(og), to_float_vector(o2)) << "add_rms_norm out " << what;
      }
      Pair gu = rand({T, 2 * D}, 3.0f);
      expect_close(ops::silu_mul(gpu_ws_, gu.gpu), ops::silu_mul(cpu_ws_, gu.cpu), kBf16Out,
                   "silu_mul", what);
      Pair a = rand({T, D}), c = rand({T, D});
      Tensor ag = a.gpu.clone(), ac = a.cpu.clone();
      ops::add_inplace(ag, c.gpu);
      ops::add_inplace(ac, c.cpu);
      expect_close(ag, ac, kBf16Out, "add", what);
      // concat of a strided slice and a selected row view, as the model builds [c_kv | k_pe]
      Pair lat = rand({T, D + 64});
      Pair pe = rand({T, 1, 64});
      expect_close(ops::concat_cols(gpu_ws_, lat.gpu.narrow(1, 0, D), pe.gpu.select(1, 0)),
                   ops::concat_cols(cpu_ws_, lat.cpu.narrow(1, 0, D), pe.cpu.select(1, 0)), 0,
                   "concat_cols", what);
    }
  }
  Pair src = rand({50, 96});
  Pair rows = ints({3, 49, 0, 3, 17});
  expect_close(ops::gather_rows(gpu_ws_, src.gpu, rows.gpu),
               ops::gather_rows(cpu_ws_, src.cpu, rows.cpu), 0, "gather_rows", "5 of 50");
}

TEST_F(CudaOps, RopeBothPairingsOnStridedViews) {
  for (bool inter : {true, false}) {
    for (int64_t d : {8, 64}) {
      // A thread per pair (decode sizes: one head, 3, 17, 64) and per 8 heads from 2^17 pairs
      // (prefill: 64 heads, and 17 with a part group; d = 64 only).
      const std::vector<std::pair<int64_t, int64_t>> th = {{1, 1},  {1, 64},  {5, 3},
                                                           {5, 17}, {70, 64}, {250, 17}};
      for (const auto& [T, H] : th) {
        if (T > 5 && d != 64) continue;
        Pair x = rand({T, H, d + 192}, 2.0f);
        Pair xr = x.narrow(2, 192, d);  // the rope slice of [nope | rope] heads
        std::vector<float> inv(static_cast<size_t>(d / 2));
        for (int64_t j = 0; j < d / 2; ++j)
          inv[j] = static_cast<float>(std::pow(8e6, -2.0 * j / d));
        Tensor invc = Tensor::from_vector(inv, {d / 2});
        std::vector<int32_t> pv;
        for (int64_t t = 0; t < T; ++t) pv.push_back(static_cast<int32_t>(rng_.next_u64() % 40000));
        Pair pos = ints(pv);
        const RopeParams rp{inter, 1.25f};
        ops::rope(xr.gpu, pos.gpu, invc.to(Device::cuda()), rp);
        ops::rope(xr.cpu, pos.cpu, invc, rp);
        expect_close(x.gpu, x.cpu, kBf16Out, "rope",
                     std::string(inter ? "interleaved" : "neox") + " d=" + std::to_string(d) +
                         " T=" + std::to_string(T) + " H=" + std::to_string(H));
      }
    }
  }
}

TEST_F(CudaOps, ArgmaxLowestIndexOnTies) {
  Pair l = rand({3, 154880}, 10.0f, DType::F32);
  expect_equal_ints(ops::argmax(gpu_ws_, l.gpu), ops::argmax(cpu_ws_, l.cpu), "argmax",
                    "vocab 154880");
  std::vector<float> v(2 * 1000);
  for (auto& x : v) x = static_cast<float>(rng_.uniform());
  v[700] = v[300] = 5.0f;                              // tie: 300 wins
  for (int i = 1000; i < 2000; ++i) v[i] = -INFINITY;  // all -inf: index 0, as on the CPU
  Tensor c = Tensor::from_vector(v, {2, 1000});
  expect_equal_ints(ops::argmax(gpu_ws_, c.to(Device::cuda())), ops::argmax(cpu_ws_, c), "argmax",
                    "ties");
  // One chunk, an exact number of 4096-value chunks, a ragged tail; rows of a multiple of 4
  // values strided by a multiple of 4 (the vector path) or not (the scalar path); the best value in
  // the last chunk, a tie across chunks (the lower index wins), NaN (never wins).
  for (int64_t V : {100, 8192, 154880, 10001}) {
    for (int64_t pad : {0, 3}) {
      Pair l2 = rand({5, V + pad}, 4.0f, DType::F32);
      Tensor h = l2.cpu.clone();
      float* d = h.data<float>();
      d[0 * (V + pad) + V - 1] = 100.0f;                                 // row 0: the last value
      d[1 * (V + pad) + V / 2] = d[1 * (V + pad) + V - 2] = 90;          // row 1: tie, V / 2 wins
      d[2 * (V + pad) + 7] = NAN;                                        // row 2: NaN ignored
      for (int64_t i = 0; i < V; ++i) d[3 * (V + pad) + i] = -INFINITY;  // row 3: index 0
      const Tensor cpu_rows = h.narrow(1, 0, V), gpu_rows = h.to(Device::cuda()).narrow(1, 0, V);
      expect_equal_ints(ops::argmax(gpu_ws_, gpu_rows), ops::argmax(cpu_ws_, cpu_rows), "argmax",
                        "V=" + std::to_string(V) + " pad " + std::to_string(pad));
    }
  }
}

// Constrained decoding's mask: fresh random logits and bitmasks of every density (all ones,
// dense, sparse, one token, none), vocabularies that end inside a word or on its edge, strided
// rows; the GPU must leave exactly the CPU's values (-inf where the bit is clear).
TEST_F(CudaOps, MaskLogitsMatchesCpu) {
  for (int64_t V : {1, 31, 32, 33, 1000, 4097, 154880}) {
    for (int64_t pad : {0, 5}) {
      const int64_t T = 6, W = (V + 31) / 32;
      Pair l = rand({T, V + pad}, 3.0f, DType::F32);
      std::vector<int32_t> bits(static_cast<size_t>(T * W));
      for (int64_t t = 0; t < T; ++t)
        for (int64_t w = 0; w < W; ++w) {
          uint32_t b = 0;
          switch (t) {
            case 0:
              b = 0xffffffffu;
              break;  // unconstrained
            case 1:
              b = static_cast<uint32_t>(rng_.next_u64());
              break;  // half
            case 2:
              b = rng_.uniform() < 0.05 ? 1u << (rng_.next_u64() % 32) : 0;  // sparse
              break;
            case 3:
              b = w == W / 2 ? 1u << (V / 2 % 32) : 0;
              break;  // one token
            case 4:
              b = 0;
              break;  // none
            default:
              b = rng_.uniform() < 0.5 ? 0xffffffffu : 0;
              break;  // whole words
          }
          bits[t * W + w] = static_cast<int32_t>(b);
        }
      const Tensor mask = Tensor::from_vector(bits, {T, W});
      // Masked through [T, V] views of [T, V + pad] rows; read back whole (device tensors copy
      // only when contiguous) and compared on the first V columns.
      Tensor cpu = l.cpu.narrow(1, 0, V), gpu = l.gpu.narrow(1, 0, V);
      const std::vector<float> before = to_float_vector(l.cpu.clone());
      ops::mask_logits(cpu_ws_, cpu, mask);
      ops::mask_logits(gpu_ws_, gpu, mask.to(Device::cuda()));
      const std::vector<float> c = to_float_vector(l.cpu);
      const std::vector<float> g = to_float_vector(l.gpu);
      const int64_t row = V + pad;
      int64_t bad = 0, wrong_rule = 0;
      for (int64_t t = 0; t < T; ++t)
        for (int64_t v = 0; v < row; ++v) {
          const size_t i = static_cast<size_t>(t * row + v);
          const bool allowed =
              v >= V || ((static_cast<uint32_t>(bits[t * W + v / 32]) >> (v % 32)) & 1u);
          if (std::memcmp(&c[i], &g[i], sizeof(float)) != 0) ++bad;
          if (allowed ? c[i] != before[i] : c[i] != -INFINITY) ++wrong_rule;
        }
      ErrorTable::get().add("mask_logits", static_cast<double>(bad), 0, bad == 0);
      EXPECT_EQ(bad, 0) << "V=" << V << " pad " << pad;
      EXPECT_EQ(wrong_rule, 0) << "V=" << V << " pad " << pad;
      // The row with one allowed token: the masked argmax is that token on both.
      expect_equal_ints(ops::argmax(gpu_ws_, gpu), ops::argmax(cpu_ws_, cpu), "argmax",
                        "masked V=" + std::to_string(V));
    }
  }
}

TEST_F(CudaOps, KvStoreAndGatherOverPartialPages) {
  for (int64_t ps : {1, 16, 64}) {
    Meta m = make_meta({1, 37, 130}, {1, 5, 17}, ps);
    const int64_t R = 576, T = m.cpu.num_tokens();
    Pair pool = rand({m.slots, R});
    Pair rows = rand({T, R + 64}).narrow(1, 0, R);  // strided rows
    ops::kv_store(rows.gpu, m.gpu, pool.gpu);
    ops::kv_store(rows.cpu, m.cpu, pool.cpu);
    expect_close(pool.gpu, pool.cpu, 0, "kv_store", "page " + std::to_string(ps));
    expect_close(ops::kv_gather(gpu_ws_, pool.gpu, m.gpu, 168),
                 ops::kv_gather(cpu_ws_, pool.cpu, m.cpu, 168), 0, "kv_gather",
                 "page " + std::to_string(ps));
  }
}

// The fused latent-row store against the CPU's norm, concat, rope and store, over strided rows,
// both rope pairings, partial pages and padding slots (which must write nothing).
TEST_F(CudaOps, MlaKvStoreNormRopeAndStore) {
  for (bool inter : {true, false}) {
    for (int64_t n : {512, 40}) {
      Meta m = make_meta({1, 37, 130}, {1, 5, 17}, 16);
      const int64_t dr = 64, T = m.cpu.num_tokens();
      Pair pool = rand({m.slots, n + dr});
      Pair xfull = rand({T, n + dr + 24}, 2.0f);
      Pair x = xfull.narrow(1, 8, n + dr);  // strided rows
      Pair w = rand({n}, 1.0f, DType::F32);
      std::vector<float> inv(static_cast<size_t>(dr / 2));
      for (int64_t j = 0; j < dr / 2; ++j)
        inv[static_cast<size_t>(j)] = static_cast<float>(std::pow(1e6, -2.0 * j / dr));
      Tensor invc = Tensor::from_vector(inv, {dr / 2});
      const RopeParams rp{inter, 1.1f};
      // A padding token (slot -1) writes nowhere.
      std::vector<int32_t> slots = to_int_vector(m.cpu.slot_mapping);
      slots[1] = -1;
      m.cpu.slot_mapping = Tensor::from_vector(slots, {T});
      m.gpu.slot_mapping = m.cpu.slot_mapping.to(Device::cuda());
      const std::vector<float> x_before = to_float_vector(xfull.gpu);
      ops::mla_kv_store(x.gpu, w.gpu, 1e-6f, invc.to(Device::cuda()), rp, m.gpu, pool.gpu);
      ops::mla_kv_store(x.cpu, w.cpu, 1e-6f, invc, rp, m.cpu, pool.cpu);
      const std::string what =
          std::string(inter ? "interleaved" : "neox") + " n=" + std::to_string(n);
      expect_close(pool.gpu, pool.cpu, kBf16Out, "mla_kv_store", what);
      EXPECT_EQ(to_float_vector(xfull.gpu), x_before) << "x modified " << what;
    }
  }
}

TEST_F(CudaOps, LinearSkinnyAndCublasLt) {
  struct Case {
    int64_t M, N, K;
    DType w, out;
    int64_t x_stride;  // 0: contiguous
  };
  const std::vector<Case> cases = {
      {1, 2048, 6144, DType::BF16, DType::BF16, 0},   // q_a at batch 1 (split-K)
      {3, 576, 6144, DType::BF16, DType::BF16, 0},    // kv_a (split-K)
      {16, 4096, 2048, DType::BF16, DType::BF16, 0},  // largest skinny batch
      {17, 1000, 640, DType::BF16, DType::F32, 0},    // cuBLASLt, f32 logits
      {64, 2048, 6144, DType::BF16, DType::BF16, 0},  // cuBLASLt
      {1, 256, 6144, DType::F32, DType::F32, 0},      // fp32 router
      {130, 32, 6144, DType::F32, DType::F32, 0},     // indexer head weights at prefill size
      {300, 256, 6144, DType::F32, DType::F32, 0},    // router at prefill size (bf16 x3 split)
      {127, 256, 640, DType::F32, DType::F32, 0},     // last row count of the f32 skinny path
      {128, 256, 640, DType::F32, DType::F32, 700},   // first of the split, strided x
      {511, 32, 6144, DType::F32, DType::F32, 0},     // indexer: last of the skinny family
      {512, 32, 6144, DType::F32, DType::F32, 0},     // indexer: first of the split
      {5, 13, 100, DType::BF16, DType::BF16, 0},      // K % 8 != 0: scalar path
      {2, 77, 264, DType::BF16, DType::BF16, 300},    // misaligned rows: scalar path
      {4, 640, 512, DType::BF16, DType::BF16, 576},   // latent slice (skinny, strided)
      {20, 640, 512, DType::BF16, DType::BF16, 576},  // latent slice (cuBLASLt, ld 576)
  };
  for (const Case& c : cases) {
    if (small_only() && c.M * c.N * c.K > (int64_t{64} << 20)) continue;
    Pair x = c.x_stride ? rand({c.M, c.x_stride}).narrow(1, 0, c.K) : rand({c.M, c.K});
    Pair w = rand({c.N, c.K}, 0.05f, c.w);
    const std::string what =
        std::to_string(c.M) + "x" + std::to_string(c.N) + "x" + std::to_string(c.K);
    Tensor g = ops::linear(gpu_ws_, x.gpu, Weight{w.gpu, {}, WeightFormat::kDense}, c.out);
    Tensor r = ops::linear(cpu_ws_, x.cpu, Weight{w.cpu, {}, WeightFormat::kDense}, DType::F32);
    expect_close(g, r, c.out == DType::F32 ? kF32Out : kBf16Out,
                 c.out == DType::F32 ? "linear f32 out" : "linear", what);
  }
}

// Default-mode cuBLASLt GEMMs run the algorithm the heuristic picked at the top of their row
// bucket (heuristics::lt_row_bucket): at every row count of a sweep across bucket edges, a
// bucket's top met before or after the counts that borrow its algorithm, the output matches the
// CPU's (the default model's prefill projections, an f32 output and a strided input among them).
TEST_F(CudaOps, LinearRowCountsRunTheirBucketsAlgorithm) {
  struct Shape {
    int64_t N, K;
    DType out;
    int64_t x_stride;  // 0: contiguous
  };
  const std::vector<Shape> shapes = {{304, 256, DType::BF16, 0},
                                     {1536, 256, DType::BF16, 0},
                                     {256, 768, DType::F32, 0},
                                     {640, 512, DType::BF16, 576}};
  // 1536 first (a top before its borrowers), then counts below it, then 3072 after 2049.
  const std::vector<int64_t> rows = {1536, 5,   7,   9,    13,   25,   33,   49,  97,
                                     193,  385, 769, 1025, 1100, 2049, 3072, 2500};
  for (const Shape& sh : shapes)
    for (int64_t M : rows) {
      if (small_only() && M * sh.N * sh.K > (int64_t{64} << 20)) continue;
      Pair x = sh.x_stride ? rand({M, sh.x_stride}).narrow(1, 0, sh.K) : rand({M, sh.K});
      Pair w = rand({sh.N, sh.K}, 0.05f);
      const std::string what = std::to_string(M) + "x" + std::to_string(sh.N) + "x" +
                               std::to_string(sh.K) + " bucket " +
                               std::to_string(cuda::heuristics::lt_row_bucket(M));
      Tensor g = ops::linear(gpu_ws_, x.gpu, Weight{w.gpu, {}, WeightFormat::kDense}, sh.out);
      Tensor r = ops::linear(cpu_ws_, x.cpu, Weight{w.cpu, {}, WeightFormat::kDense}, DType::F32);
      expect_close(g, r, sh.out == DType::F32 ? kF32Out : kBf16Out,
                   sh.out == DType::F32 ? "linear f32 out" : "linear", what);
    }
}

// The exact three-way bf16 split of fp32 weights (the fp32 linears' prefill path): hi + mid + lo
// equals w exactly over magnitudes from 1e-30 to 1e30, both signs, values with all 24 bits set
// and values exact in bf16 (mid = lo = 0); and the thirds summed in the stated order.
TEST_F(CudaOps, F32WeightSplitIntoThreeBf16IsExact) {
  std::vector<float> w;
  for (int i = 0; i < 4000; ++i) {
    const double mag = std::pow(10.0, -30.0 + 60.0 * rng_.uniform());
    w.push_back(static_cast<float>((i % 2 ? -1.0 : 1.0) * mag * (1.0 + rng_.uniform())));
  }
  w.push_back(1.0f + std::ldexp(1.0f, -23));  // the lowest bit alone below the leading one
  w.push_back(std::nextafter(2.0f, 0.0f));    // all 24 bits set: hi rounds up to 2
  w.push_back(0.375f);                        // exact in bf16
  w.push_back(0.0f);
  const int64_t N = static_cast<int64_t>(w.size()) / 4, K = 4;  // [N, K]
  Tensor wg = Tensor::from_vector(w, {N, K}).to(Device::cuda());
  Tensor pieces = Tensor::empty({3 * N, K}, DType::BF16, Device::cuda());  // [3N, K]
  cuda::k::split_f32_bf16x3(wg.data<float>(), N, K, pieces.raw(), nullptr);
  const std::vector<float> pv = to_float_vector(pieces);
  int64_t bad = 0;
  for (int64_t i = 0; i < N * K; ++i) {
    const double sum = static_cast<double>(pv[i]) + pv[N * K + i] + pv[2 * N * K + i];
    bad += sum != static_cast<double>(w[i]);
  }
  EXPECT_EQ(bad, 0) << "of " << N * K << " weights";
  EXPECT_EQ(pv[(N * K - 2)], 0.375f);
  EXPECT_EQ(pv[N * K + N * K - 2], 0.0f);
  // sum_thirds_f32: (p[n] + p[N + n]) + p[2N + n] into rows strided by 7.
  const int64_t M = 3, Nn = 5;
  std::vector<float> p3;
  for (int64_t i = 0; i < M * 3 * Nn; ++i)
    p3.push_back(static_cast<float>(8.0 * rng_.uniform() - 4.0));
  Tensor pg = Tensor::from_vector(p3, {M, 3 * Nn}).to(Device::cuda());
  Tensor og = Tensor::from_vector(std::vector<float>(M * 7, -1.0f), {M, 7}).to(Device::cuda());
  cuda::k::sum_thirds_f32(pg.data<float>(), M, Nn, og.data<float>(), 7, nullptr);
  const std::vector<float> ov = to_float_vector(og);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < 7; ++n) {
      const float* r = &p3[m * 3 * Nn + n];
      EXPECT_EQ(ov[m * 7 + n], n < Nn ? (r[0] + r[Nn]) + r[2 * Nn] : -1.0f) << m << " " << n;
    }
}

// The absorbed query as the model builds it: head_matmul into the first 512 columns of
// [T, 64, 576] rows, the rope part copied (row-strided ops::copy) into the last 64; the buffer
// starts random, so a write past either column range shows. T = 300 takes cuBLASLt.
TEST_F(CudaOps, HeadMatmulIntoColumnsAndRowStridedCopy) {
  for (int64_t T : {1, 3, 20, 300}) {
    if (small_only() && T > 1) continue;
    Pair q = rand({T, 64, 192});
    Pair wuk = rand({64, 512, 128}, 0.1f);
    Pair buf = rand({T, 64, 576});
    const auto build = [&](const Tensor& qq, const Tensor& w, Tensor b) {
      Tensor lat = b.narrow(2, 0, 512);
      ops::head_matmul_into(qq.narrow(2, 0, 128), w, lat);
      Tensor pe = b.narrow(2, 512, 64).merge_dims(0);
      ops::copy(qq.narrow(2, 128, 64).merge_dims(0), pe);
      return b;
    };
    expect_close(build(q.gpu, wuk.gpu, buf.gpu), build(q.cpu, wuk.cpu, buf.cpu), kBf16Out,
                 "head_matmul_into + copy", "T=" + std::to_string(T));
  }
}

TEST_F(CudaOps, HeadMatmulAbsorbedShapes) {
  for (int64_t T : {1, 3, 20}) {
    if (small_only() && T > 1) continue;
    // q_nope . W_UK^T: x is the nope slice of [T, 64, 256] q rows.
    Pair q = rand({T, 64, 256});
    Pair wuk = rand({64, 512, 192}, 0.1f);
    expect_close(ops::head_matmul(gpu_ws_, q.gpu.narrow(2, 0, 192), wuk.gpu),
                 ops::head_matmul(cpu_ws_, q.cpu.narrow(2, 0, 192), wuk.cpu), kBf16Out,
                 "head_matmul", "W_UK T=" + std::to_string(T));
    Pair z = rand({T, 64, 512});
    Pair wuv = rand({64, 256, 512}, 0.1f);
    expect_close(ops::head_matmul(gpu_ws_, z.gpu, wuv.gpu),
                 ops::head_matmul(cpu_ws_, z.cpu, wuv.cpu), kBf16Out, "head_matmul",
                 "W_UV T=" + std::to_string(T));
  }
  Pair x = rand({5, 4, 19}), w = rand({4, 7, 19});  // odd K: scalar path
  expect_close(ops::head_matmul(gpu_ws_, x.gpu, w.gpu), ops::head_matmul(cpu_ws_, x.cpu, w.cpu),
               kBf16Out, "head_matmul", "odd");
}

// Random top-k rows for decode: a shuffled subset of [0, pos] plus out-of-range entries and -1.
std::vector<int32_t> random_topk(Rng& rng, const std::vector<int32_t>& pos_of, int64_t K,
                                 bool ascending) {
  std::vector<int32_t> out;
  for (int32_t pos : pos_of) {
    std::set<int32_t> pick;
    const int64_t want = std::min<int64_t>(K - K / 8, pos + 1);
    while (static_cast<int64_t>(pick.size()) < want)
      pick.insert(static_cast<int32_t>(rng.next_u64() % (pos + 1)));
    std::vector<int32_t> row(pick.begin(), pick.end());
    if (!ascending) {
      row.push_back(pos + 5);  // beyond the token: skipped
      for (size_t i = row.size() - 1; i > 0; --i) std::swap(row[i], row[rng.next_u64() % (i + 1)]);
    }
    row.resize(static_cast<size_t>(K), -1);
    if (!ascending) std::swap(row[0], row[row.size() - 1]);  // a -1 in front
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

TEST_F(CudaOps, MlaDecodeDenseSparseAndSplit) {
  struct Case {
    std::vector<int32_t> lens, q;
    int64_t H, L, Lc, K, ps;  // K = 0: dense
  };
  const std::vector<Case> cases = {
      {{1, 9, 23}, {1, 3, 5}, 4, 40, 32, 0, 4},               // tiny golden dims
      {{1, 9, 23}, {1, 3, 5}, 4, 40, 32, 8, 4},               // tiny, sparse
      {{300}, {1}, 5, 144, 128, 0, 16},                       // batch 1, odd heads
      {{4100, 37}, {2, 3}, 64, 576, 512, 0, 64},              // GLM-5.2 dims, dense, past 2048
      {{9000}, {1}, 64, 576, 512, 0, 64},                     // batch 1, long: many splits
      {{5000, 2500, 17}, {1, 2, 1}, 64, 576, 512, 2048, 64},  // top-2048 sparse
      {{700, 90, 1500}, {4, 4, 4}, 64, 576, 512, 0, 64},      // verify: 4 query tokens per sequence
      {{700, 90, 1500}, {4, 4, 4}, 64, 576, 512, 2048, 64},   // verify, rows mostly -1 (skipped)
      // 128 tokens: one split each in the 64-head kernel, 64 chunks, two slot-table spans.
      {{2600, 2300}, {64, 64}, 64, 576, 512, 2048, 64},
      // Short GLM-5.2 rows, kept under TANDEM_OPS_SMALL (the sanitizers' run).
      {{70, 33}, {2, 1}, 64, 576, 512, 0, 16},
      {{130}, {3}, 64, 576, 512, 64, 16},
  };
  for (const Case& c : cases) {
    if (small_only() && c.H == 64 && c.lens[0] > 200) continue;
    Meta m = make_meta(c.lens, c.q, c.ps);
    const int64_t T = m.cpu.num_tokens();
    Pair pool = rand({m.slots, c.L});
    Pair q = rand({T, c.H, c.L});
    Pair topk;
    if (c.K) topk = ints(random_topk(rng_, m.pos_of, c.K, false), {T, c.K});
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.L));
    const std::string what = "H=" + std::to_string(c.H) + " L=" + std::to_string(c.L) +
                             " len0=" + std::to_string(c.lens[0]) + (c.K ? " sparse" : " dense");
    const Tensor want = ops::mla_decode(cpu_ws_, q.cpu, pool.cpu, m.cpu, topk.cpu, scale, c.Lc);
    // The tensor-core kernels (16 heads per block; all 64, where the dims allow, on mma.sync and
    // on warpgroup MMA), the SIMT one, and the chain (up to 4,096 keys, GLM-5.2 dims).
    const char* names[] = {"mla_decode (mma)", "mla_decode (mma, 64 heads)",
                           "mla_decode (wgmma, 64 heads)", "mla_decode (simt)",
                           "mla_decode (chain)"};
    for (int kernel = 0; kernel < 5; ++kernel) {
      use_mla_kernel(static_cast<MlaKernel>(kernel));
      // The wgmma kernel also with 2 and 4 column parts (blocks on 256 / 128 value columns).
      for (int parts : kernel == 2 ? std::vector<int>{0, 2, 4} : std::vector<int>{0}) {
        cuda::cuda_backend()->set_mla_column_parts(parts);
        expect_close(ops::mla_decode(gpu_ws_, q.gpu, pool.gpu, m.gpu, topk.gpu, scale, c.Lc), want,
                     kAttention, names[kernel], what + " column parts " + std::to_string(parts));
      }
      cuda::cuda_backend()->set_mla_column_parts(0);
    }
    use_automatic_mla_kernel();
  }
}

TEST_F(CudaOps, MlaPrefillCausalAndSparse) {
  struct Case {
    std::vector<int32_t> lens, q;
    int64_t H, dn, dr, dv, K;
  };
  const std::vector<Case> cases = {
      {{5, 12}, {5, 4}, 4, 16, 8, 16, 0},              // tiny dims, cached prefix
      {{40}, {40}, 4, 16, 8, 16, 8},                   // tiny, top-8 sparse
      {{1, 33, 70}, {1, 17, 70}, 3, 128, 64, 128, 0},  // DeepSeek dims, runs straddling tiles
      {{2100, 300}, {24, 40}, 8, 192, 64, 256, 2048},  // GLM-5 dims, top-2048 past 2048
  };
  for (const Case& c : cases) {
    if (small_only() && c.dn >= 128) continue;
    Meta m = make_meta(c.lens, c.q, 16);
    const int64_t T = m.cpu.num_tokens();
    int64_t total = 0;
    for (int32_t l : c.lens) total += l;
    Pair q = rand({T, c.H, c.dn + c.dr});
    Pair kv = rand({total, c.H, c.dn + c.dv});
    Pair lat = rand({total, 512 + c.dr});
    Pair kpe = lat.narrow(1, 512, c.dr);
    Pair topk;
    if (c.K) topk = ints(random_topk(rng_, m.pos_of, c.K, true), {T, c.K});
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.dn + c.dr));
    const std::string what = "H=" + std::to_string(c.H) + " dqk=" + std::to_string(c.dn + c.dr) +
                             (c.K ? " sparse" : " causal");
    const Tensor want =
        ops::mla_prefill(cpu_ws_, q.cpu, kv.cpu, kpe.cpu, m.cpu, topk.cpu, scale, c.dv);
    for (bool tc : {true, false}) {
      cuda::cuda_backend()->set_mla_tensor_cores(tc);
      expect_close(ops::mla_prefill(gpu_ws_, q.gpu, kv.gpu, kpe.gpu, m.gpu, topk.gpu, scale, c.dv),
                   want, kAttention, tc ? "mla_prefill (mma)" : "mla_prefill (simt)", what);
    }
    cuda::cuda_backend()->set_mla_tensor_cores(true);
  }
}

// Indices must match exactly; a difference is tolerated only where the two scores it swaps are
// within rounding of the K-th score (checked against a double-precision recomputation).
void check_topk(const Tensor& gpu, const Tensor& cpu, const std::vector<float>& q,
                const std::vector<float>& w, const std::vector<float>& pool, bool exact_required,
                const std::vector<int32_t>& seq_of, const std::vector<int32_t>& pos_of,
                const std::vector<int32_t>& table, int64_t max_pages, int64_t ps, int64_t Hi,
                int64_t Di, int64_t K, const std::string& op, const std::string& what) {
  const std::vector<int32_t> g = to_int_vector(gpu), c = to_int_vector(cpu);
  const int64_t T = static_cast<int64_t>(seq_of.size());
  int64_t exact = 0, near_tie = 0, wrong = 0;
  for (int64_t t = 0; t < T; ++t) {
    std::vector<int32_t> gr(g.begin() + t * K, g.begin() + (t + 1) * K),
        cr(c.begin() + t * K, c.begin() + (t + 1) * K);
    if (gr == cr) {
      ++exact;
      continue;
    }
    auto score = [&](int32_t j) {
      const int64_t slot =
          static_cast<int64_t>(table[seq_of[t] * max_pages + j / ps]) * ps + j % ps;
      double s = 0, mag = 0;
      for (int64_t h = 0; h < Hi; ++h) {
        double d = 0;
        for (int64_t i = 0; i < Di; ++i)
          d += static_cast<double>(q[(t * Hi + h) * Di + i]) * pool[slot * Di + i];
        s += w[t * Hi + h] * std::max(d, 0.0);
        mag += std::fabs(w[t * Hi + h] * d);
      }
      return std::pair<double, double>(s, mag);
    };
    std::vector<double> all;
    double mag = 0;
    for (int32_t j = 0; j <= pos_of[t]; ++j) {
      auto [s, m] = score(j);
      all.push_back(s);
      mag = std::max(mag, m);
    }
    std::vector<double> sorted = all;
    std::nth_element(sorted.begin(), sorted.begin() + (K - 1), sorted.end(),
                     std::greater<double>());
    const double thr = sorted[K - 1];
    std::set<int32_t> gs(gr.begin(), gr.end()), cs(cr.begin(), cr.end());
    bool ok = gs.size() == cs.size() && std::is_sorted(gr.begin(), gr.end());
    for (int32_t j : gs)  // an index outside the row (an unwritten output) is simply wrong
      if (!cs.count(j) && (j < 0 || j > pos_of[t] || std::fabs(all[j] - thr) > 1e-5 * mag))
        ok = false;
    for (int32_t j : cs)
      if (!gs.count(j) && std::fabs(all[j] - thr) > 1e-5 * mag) ok = false;
    if (exact_required) ok = false;
    ok ? ++near_tie : ++wrong;
  }
  ErrorTable::get().add(op, static_cast<double>(wrong), 0, wrong == 0);
  EXPECT_EQ(wrong, 0) << op << " " << what << ": " << wrong << " rows differ beyond near-ties";
  std::printf("  %s %s: %lld rows exact, %lld differ only at near-ties\n", op.c_str(), what.c_str(),
              static_cast<long long>(exact), static_cast<long long>(near_tie));
}

TEST_F(CudaOps, IndexerTopKExactSelection) {
  struct Case {
    std::vector<int32_t> lens, q;
    int64_t Hi, Di, K;
    // 0 random, 1 q = 0 (all scores tie at 0), 2 repeated key rows (exact ties), 3 odd
    // positions' keys zero (half the row ties at 0, below the threshold).
    int mode;
    int64_t page_size = 64;
  };
  const std::vector<Case> cases = {
      {{3, 30, 50}, {3, 6, 50}, 16, 16, 8, 0},           // tiny golden dims, prefill-like
      {{5000, 2100, 100}, {2, 1, 1}, 32, 128, 2048, 0},  // GLM-5.2 dims
      {{3000}, {3}, 32, 128, 2048, 1},                   // all-zero scores: first 2048
      {{2600, 70}, {2, 2}, 32, 128, 2048, 2},            // repeated keys: ties by position
      {{700}, {1}, 64, 128, 256, 0},                     // DeepSeek-V3.2: 64 index heads
      // Long rows: the selection's middle rounds over the keys above its sampled threshold
      // (33k random scores), and over the row again when more than its 8,192-key buffer tie
      // there (all zero, repeated keys).
      {{33000, 4100}, {1, 2}, 32, 128, 2048, 0},
      {{10000}, {1}, 32, 128, 2048, 1},
      {{20000}, {2}, 32, 128, 2048, 2},
      {{8192}, {1}, 32, 128, 2048, 3},
      // Pages smaller than the scoring kernel's step between one thread's keys (8 at Di = 128,
      // 64 at Di = 16) and of an odd size.
      {{5000, 2300}, {2, 1}, 32, 128, 2048, 0, 4},
      {{2500, 3000}, {1, 2}, 16, 16, 256, 0, 24},
  };
  for (const Case& c : cases) {
    if (small_only() && c.Di == 128) continue;
    Meta m = make_meta(c.lens, c.q, c.page_size);
    const int64_t T = m.cpu.num_tokens();
    Pair pool = rand({m.slots, c.Di});
    if (c.mode == 2) {  // every key row is one of 5 rows
      Tensor base = rand({5, c.Di}).cpu;
      const std::vector<int32_t> table = to_int_vector(m.cpu.page_table);
      const int64_t mp = m.cpu.page_table.size(1);
      for (size_t b = 0; b < c.lens.size(); ++b)
        for (int32_t j = 0; j < c.lens[b]; ++j) {
          const int64_t slot =
              static_cast<int64_t>(table[b * mp + j / c.page_size]) * c.page_size + j % c.page_size;
          std::copy(base.data<float>() + (j * 7 % 5) * c.Di,
                    base.data<float>() + (j * 7 % 5 + 1) * c.Di,
                    pool.cpu.data<float>() + slot * c.Di);
        }
      pool.gpu = pool.cpu.to_dtype(DType::BF16).to(Device::cuda());
    }
    if (c.mode == 3) {
      const std::vector<int32_t> table = to_int_vector(m.cpu.page_table);
      const int64_t mp = m.cpu.page_table.size(1);
      for (size_t b = 0; b < c.lens.size(); ++b)
        for (int32_t j = 1; j < c.lens[b]; j += 2) {
          const int64_t slot =
              static_cast<int64_t>(table[b * mp + j / c.page_size]) * c.page_size + j % c.page_size;
          std::fill(pool.cpu.data<float>() + slot * c.Di,
                    pool.cpu.data<float>() + (slot + 1) * c.Di, 0.0f);
        }
      pool.gpu = pool.cpu.to_dtype(DType::BF16).to(Device::cuda());
    }
    Pair q = rand({T, c.Hi, c.Di});
    if (c.mode == 1) {
      std::fill(q.cpu.data<float>(), q.cpu.data<float>() + q.cpu.numel(), 0.0f);
      q.gpu = q.cpu.to_dtype(DType::BF16).to(Device::cuda());
    }
    Pair w = rand({T, c.Hi}, 0.2f, DType::F32);
    const std::string what = "Hi=" + std::to_string(c.Hi) + " Di=" + std::to_string(c.Di) +
                             " K=" + std::to_string(c.K) + " mode " + std::to_string(c.mode);
    Tensor r = ops::indexer_topk(cpu_ws_, q.cpu, w.cpu, pool.cpu, m.cpu, c.K);
    for (bool tc : {true, false}) {  // tensor-core and SIMT scores
      cuda::cuda_backend()->set_mla_tensor_cores(tc);
      Tensor g = ops::indexer_topk(gpu_ws_, q.gpu, w.gpu, pool.gpu, m.gpu, c.K);
      check_topk(g, r, to_float_vector(q.cpu), to_float_vector(w.cpu), to_float_vector(pool.cpu),
                 c.mode != 0, m.seq_of, m.pos_of, to_int_vector(m.cpu.page_table),
                 m.cpu.page_table.size(1), c.page_size, c.Hi, c.Di, c.K,
                 tc ? "indexer_topk (mma)" : "indexer_topk (simt)", what);
    }
    cuda::cuda_backend()->set_mla_tensor_cores(true);
  }
}

// The selection alone (k::indexer_select) on score rows given exactly, against the one tie rule
// (higher score first, equal scores by earlier position, -0 equal to +0; output ascending): every
// path of the kernel, with the rows built to reach each.
TEST_F(CudaOps, IndexerSelectExactOnGivenScores) {
  struct Row {
    int len;
    int kind;
  };
  // kinds: 0 normal; 1 relu (half exactly 0); 2 coarse (13 values: thousands tie at the
  // threshold, among the candidates); 3 fine grid (x / 64: ties among the candidates); 4 all
  // equal; 5 1/33 positive, 2/33 +0 and -0 mixed, the rest negative (T = 0 at 33k: ties across
  // both zeros); 6 the
  // sampled positions high: fewer than K keys reach the sampled threshold; 7 the sampled
  // positions low: every key reaches it.
  struct Case {
    std::vector<Row> rows;
    int64_t K;
  };
  const std::vector<Case> cases = {
      {{{50, 0}, {9, 0}, {8, 0}, {3, 0}}, 8},
      {{{2049, 0}, {3000, 0}, {4095, 0}, {4096, 0}, {4097, 0}}, 2048},
      {{{8191, 0}, {8192, 1}, {8193, 2}, {100, 0}}, 2048},
      {{{33000, 0}, {33000, 1}, {33000, 2}, {33000, 3}}, 2048},
      {{{20000, 4}, {33000, 5}, {33000, 6}, {33000, 7}}, 2048},
      {{{131077, 0}, {131072, 3}, {2100, 0}}, 2048},
      // A stride of a multiple of 4 (the selection's 4-key loads) with rows of other lengths.
      {{{33003, 0}, {33001, 2}, {40000, 1}, {24579, 3}}, 2048},
      {{{300000, 0}, {300000, 2}}, 2048},  // past the bitmap: the output by row sweeps
      {{{9000, 0}, {70000, 1}}, 512},
  };
  cudaStream_t stream = cuda::cuda_backend()->stream();
  for (const Case& c : cases) {
    const int64_t R = static_cast<int64_t>(c.rows.size());
    int64_t L = 0;
    for (const Row& r : c.rows) L = std::max<int64_t>(L, r.len);
    if (small_only() && L > 40000) continue;  // under compute-sanitizer: the short rows only
    std::vector<float> scores(static_cast<size_t>(R * L), 1e30f);  // past a row's end: unread
    std::vector<int32_t> pos, want;
    std::string what = "K=" + std::to_string(c.K) + " rows";
    for (int64_t i = 0; i < R; ++i) {
      const Row& r = c.rows[i];
      what.append(" ").append(std::to_string(r.len)).append("/").append(std::to_string(r.kind));
      float* row = scores.data() + i * L;
      for (int j = 0; j < r.len; ++j) {
        const float x = static_cast<float>(rng_.normal());
        switch (r.kind) {
          case 1:
            row[j] = std::max(x, 0.0f);
            break;
          case 2:
            row[j] = std::round(x * 2.0f) / 2.0f;
            break;
          case 3:
            row[j] = std::round(x * 64.0f) / 64.0f;
            break;
          case 4:
            row[j] = 0.25f;
            break;
          case 5:
            row[j] = j % 33 == 0  ? std::fabs(x) + 0.1f
                     : j % 33 < 3 ? (j % 2 ? 0.0f : -0.0f)
                                  : -std::fabs(x) - 0.1f;
            break;
          default:
            row[j] = x;
        }
      }
      if (r.kind == 6 || r.kind == 7) {
        // The kernel's samples: runs of 8 keys starting at (run * (len - 8) / 511) & ~7.
        for (int run = 0; run < 512; ++run) {
          const int start = static_cast<int>(static_cast<int64_t>(run) * (r.len - 8) / 511) & ~7;
          for (int e = 0; e < 8; ++e)
            row[start + e] = r.kind == 6 ? (run < 40 ? 10.0f + e + run : row[start + e]) : -10.0f;
        }
      }
      pos.push_back(r.len - 1);
      // The reference: the tie rule, then positions ascending, -1 padded.
      std::vector<int32_t> order(static_cast<size_t>(r.len));
      std::iota(order.begin(), order.end(), 0);
      const int64_t take = std::min<int64_t>(c.K, r.len);
      auto better = [&](int32_t a, int32_t b) {
        return row[a] > row[b] || (row[a] == row[b] && a < b);
      };
      std::nth_element(order.begin(), order.begin() + (take - 1), order.end(), better);
      std::sort(order.begin(), order.begin() + take);
      for (int64_t k = 0; k < c.K; ++k) want.push_back(k < take ? order[k] : -1);
    }
    Tensor sg = Tensor::from_vector(scores, {R, L}).to(Device::cuda());  // [R, L]
    Tensor pg = Tensor::from_vector(pos, {R}).to(Device::cuda());        // [R]
    Tensor og =
        Tensor::from_vector(std::vector<int32_t>(static_cast<size_t>(R * c.K), -7), {R, c.K})
            .to(Device::cuda());  // [R, K], poisoned
    cuda::k::IndexerParams p;
    p.scores = sg.data<float>();
    p.meta.token_pos = pg.data<int32_t>();
    p.out = og.data<int32_t>();
    p.K = c.K;
    p.max_len = L;
    p.T = R;
    cuda::k::indexer_select(p, 0, R, stream);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    expect_equal_ints(og, Tensor::from_vector(want, {R, c.K}), "indexer_select", what);
  }
}

TEST_F(CudaOps, MoeRouteIdsExact) {
  struct Case {
    int64_t T, E, k, groups, topk_group;
    bool bias;
    bool ties = false;  // logits on a coarse grid: many equal scores (lower index wins)
  };
  // Expert counts that are not a multiple of 32, groups of 4 and 32 experts, k up to 32, ties.
  const std::vector<Case> cases = {
      {1, 256, 8, 1, 1, true},         {7, 256, 8, 1, 1, true},       {130, 256, 8, 8, 4, true},
      {5, 16, 4, 4, 2, true},          {3, 8, 2, 1, 1, false},        {64, 160, 6, 1, 1, true},
      {9, 100, 7, 1, 1, false},        {4, 512, 8, 1, 1, true},       {2, 600, 8, 1, 1, true},
      {33, 256, 8, 1, 1, false, true}, {6, 64, 32, 1, 1, true, true},
  };
  for (const Case& c : cases) {
    Pair logits = rand({c.T, c.E}, 3.0f, DType::F32);
    if (c.ties) {
      Tensor h = logits.cpu.clone();
      for (int64_t i = 0; i < h.numel(); ++i)
        h.data<float>()[i] = std::round(h.data<float>()[i] * 2.0f) / 2.0f;
      logits = {h, h.to(Device::cuda())};
    }
    Pair bias = c.bias ? rand({c.E}, 0.3f, DType::F32) : Pair{};
    const RouteParams rp{c.k, c.groups, c.topk_group, true, 2.5f};
    ops::Routing g = ops::moe_route(gpu_ws_, logits.gpu, bias.gpu, rp);
    ops::Routing r = ops::moe_route(cpu_ws_, logits.cpu, bias.cpu, rp);
    const std::string what = "T=" + std::to_string(c.T) + " E=" + std::to_string(c.E) +
                             " k=" + std::to_string(c.k) + " groups=" + std::to_string(c.groups) +
                             (c.ties ? " ties" : "");
    expect_equal_ints(g.idx, r.idx, "moe_route ids", what);
    expect_close(g.weights, r.weights, 1e-5, "moe_route weights", what);
    // Expert parallelism: the second quarter of the experts is local, the rest become -1.
    RouteParams lp = rp;
    lp.local_first = c.E / 4;
    lp.local_count = c.E / 4;
    ops::Routing gl = ops::moe_route(gpu_ws_, logits.gpu, bias.gpu, lp);
    ops::Routing rl = ops::moe_route(cpu_ws_, logits.cpu, bias.cpu, lp);
    expect_equal_ints(gl.idx, rl.idx, "moe_route ids (ep)", what);
  }
}

// moe_prepare's counting sort against a host one: counts, offsets, the stable permutation (pair
// order within an expert), its inverse (-1 for pairs of no local expert), the active experts in
// order. Pair counts around the kernel's 1,024-pair tile, a 4,096-token prefill's 32,768 pairs
// (each warp's lanes mostly distinct experts) and a skewed routing (whole warps on one expert),
// expert counts that need the per-warp table past 48 KB of shared memory; decode-sized steps (up
// to 33 pairs) with repeats and pairs of no local expert.
TEST_F(CudaOps, MoePrepareIsAStableCountingSort) {
  struct Case {
    int64_t P, E;
    bool skewed;
  };
  const std::vector<Case> cases = {{1, 8, false},      {7, 256, false},    {8, 256, false},
                                   {24, 256, true},    {32, 256, false},   {32, 8, true},
                                   {17, 100, false},   {33, 256, true},    {1023, 256, false},
                                   {1024, 256, true},  {1025, 256, false}, {32768, 256, false},
                                   {32768, 256, true}, {5000, 384, false}, {3001, 2048, true}};
  cudaStream_t stream = cuda::cuda_backend()->stream();
  for (const Case& c : cases) {
    std::vector<int32_t> idx(static_cast<size_t>(c.P));
    for (auto& e : idx) {
      const uint64_t u = rng_.next_u64() % 100;
      e = u < 5                ? -1
          : c.skewed && u < 60 ? static_cast<int32_t>(rng_.next_u64() % 3)
                               : static_cast<int32_t>(rng_.next_u64() % c.E);
    }
    std::vector<int32_t> counts(static_cast<size_t>(c.E), 0), offsets(static_cast<size_t>(c.E + 1)),
        perm, inv(idx.size(), -1), active;
    for (int32_t e : idx)
      if (e >= 0) ++counts[static_cast<size_t>(e)];
    offsets[0] = 0;
    for (int64_t e = 0; e < c.E; ++e) {
      offsets[static_cast<size_t>(e + 1)] =
          offsets[static_cast<size_t>(e)] + counts[static_cast<size_t>(e)];
      if (counts[static_cast<size_t>(e)] > 0) active.push_back(static_cast<int32_t>(e));
    }
    for (int64_t e = 0; e < c.E; ++e)
      for (int64_t p = 0; p < c.P; ++p)
        if (idx[static_cast<size_t>(p)] == e) {
          inv[static_cast<size_t>(p)] = static_cast<int32_t>(perm.size());
          perm.push_back(static_cast<int32_t>(p));
        }
    const Tensor d_idx = Tensor::from_vector(idx, {c.P}).to(Device::cuda());
    Tensor d_counts = Tensor::empty({c.E}, DType::I32, Device::cuda()),
           d_offsets = Tensor::empty({c.E + 1}, DType::I32, Device::cuda()),
           d_perm = Tensor::empty({c.P}, DType::I32, Device::cuda()),
           d_inv = Tensor::empty({c.P}, DType::I32, Device::cuda()),
           d_active = Tensor::empty({c.E}, DType::I32, Device::cuda()),
           d_num = Tensor::empty({1}, DType::I32, Device::cuda());
    cuda::k::moe_prepare(d_idx.data<int32_t>(), c.P, c.E, d_counts.data<int32_t>(),
                         d_offsets.data<int32_t>(), d_perm.data<int32_t>(), d_inv.data<int32_t>(),
                         d_active.data<int32_t>(), d_num.data<int32_t>(), stream);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    const std::string what =
        "P=" + std::to_string(c.P) + " E=" + std::to_string(c.E) + (c.skewed ? " skewed" : "");
    const int64_t n = static_cast<int64_t>(active.size());
    expect_equal_ints(d_counts, Tensor::from_vector(counts, {c.E}), "moe_prepare counts", what);
    expect_equal_ints(d_offsets, Tensor::from_vector(offsets, {c.E + 1}), "moe_prepare offsets",
                      what);
    expect_equal_ints(d_perm.narrow(0, 0, offsets.back()),
                      Tensor::from_vector(perm, {offsets.back()}), "moe_prepare perm", what);
    expect_equal_ints(d_inv, Tensor::from_vector(inv, {c.P}), "moe_prepare inv", what);
    expect_equal_ints(d_active.narrow(0, 0, n), Tensor::from_vector(active, {n}),
                      "moe_prepare active", what);
    EXPECT_EQ(to_int_vector(d_num)[0], n) << what;
  }
}

// moe_combine: four columns a thread where D is a multiple of 4 and the rows are 16-byte aligned,
// else a column a thread; both give the same bits (output 4 bytes off alignment takes the
// one-column kernel on the same data), and both the host's sum within bf16 rounding. Slots of -1
// (other ranks' pairs) add nothing.
TEST_F(CudaOps, MoeCombineFourColumnsAndOneGiveTheSameBits) {
  for (int64_t D : {64, 66, 6144}) {
    const int64_t T = 5, k = 3, P = T * k;
    std::vector<float> y(static_cast<size_t>(P * D)), w(static_cast<size_t>(P));
    for (auto& v : y) v = static_cast<float>(4.0 * rng_.uniform() - 2.0);
    for (auto& v : w) v = static_cast<float>(rng_.uniform());
    std::vector<int32_t> inv(static_cast<size_t>(P));
    for (int64_t i = 0; i < P; ++i) inv[i] = static_cast<int32_t>((i * 7) % P);  // a permutation
    inv[4] = -1;
    const Tensor yg = Tensor::from_vector(y, {P, D}).to(Device::cuda());
    const Tensor wg = Tensor::from_vector(w, {P}).to(Device::cuda());
    const Tensor ig = Tensor::from_vector(inv, {P}).to(Device::cuda());
    Tensor o4 = Tensor::empty({T, D}, DType::BF16, Device::cuda());       // [T, D]
    Tensor o1 = Tensor::empty({T * D + 2}, DType::BF16, Device::cuda());  // 4 bytes off
    cuda::k::moe_combine(yg.raw(), cuda::k::DT::F32, ig.data<int32_t>(), wg.data<float>(), T, k, D,
                         o4.raw(), nullptr);
    cuda::k::moe_combine(yg.raw(), cuda::k::DT::F32, ig.data<int32_t>(), wg.data<float>(), T, k, D,
                         static_cast<uint16_t*>(o1.raw()) + 2, nullptr);
    const std::vector<float> a = to_float_vector(o4), b = to_float_vector(o1);
    int64_t differ = 0, far = 0;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t d = 0; d < D; ++d) {
        differ += a[t * D + d] != b[2 + t * D + d];
        double ref = 0;
        for (int64_t j = 0; j < k; ++j)
          if (inv[t * k + j] >= 0)
            ref += static_cast<double>(w[t * k + j]) * y[inv[t * k + j] * D + d];
        far += std::abs(a[t * D + d] - ref) > 4e-3 * std::max(1.0, std::abs(ref));
      }
    EXPECT_EQ(differ, 0) << "D " << D;
    EXPECT_EQ(far, 0) << "D " << D;
  }
}

// Expert parallelism: a rank holds a quarter of the experts and skips the pairs routed elsewhere
// (id -1); the quarter-sums over the four ranks' slices add up to the full layer on the CPU.
TEST_F(CudaOps, MoeExpertsSkipOtherRanksExperts) {
  for (int64_t T : {1, 5, 64}) {
    const int64_t E = 16, k = 4, D = 256, I = 128, El = 4;
    Pair logits = rand({T, E}, 3.0f, DType::F32);
    Pair x = rand({T, D});
    Pair gu = rand({E, 2 * I, D}, 0.08f), dn = rand({E, D, I}, 0.08f);
    RouteParams rp{k, 1, 1, true, 2.5f};
    const Tensor full = ops::moe_experts(cpu_ws_, x.cpu, gu.cpu, dn.cpu,
                                         ops::moe_route(cpu_ws_, logits.cpu, Tensor(), rp));
    std::vector<float> sum(static_cast<size_t>(T * D), 0.0f);
    for (int64_t r = 0; r < E / El; ++r) {
      rp.local_first = r * El;
      rp.local_count = El;
      ops::Routing rg = ops::moe_route(gpu_ws_, logits.gpu, Tensor(), rp);
      Tensor y = ops::moe_experts(gpu_ws_, x.gpu, gu.gpu.narrow(0, r * El, El).contiguous(),
                                  dn.gpu.narrow(0, r * El, El).contiguous(), rg);
      const std::vector<float> part = to_float_vector(y);
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += part[i];
    }
    expect_close(Tensor::from_vector(sum, {T, D}), full, kMoe, "moe_experts (ep skip)",
                 "T=" + std::to_string(T));
  }
}

TEST_F(CudaOps, MoeExpertsDeviceAndHostPaths) {
  struct Case {
    int64_t T, E, k, D, I;
  };
  const std::vector<Case> cases = {
      {1, 16, 4, 256, 128},  // decode: 4 experts of one token
      {5, 16, 4, 256, 128},
      {37, 8, 2, 64, 32},      // golden dims
      {3, 16, 8, 6144, 512},   // GLM hidden size
      {200, 16, 4, 256, 128},  // 800 pairs over 16 experts: cuBLASLt per expert
      {60, 8, 4, 192, 64},     // 30 rows per expert: two passes of the tensor-core kernels
      {9, 16, 8, 512, 320},
      // 75 rows per expert, uneven: cuBLASLt per expert spread over the expert streams
      {600, 64, 8, 512, 256},
  };
  for (const Case& c : cases) {
    // The small set (compute-sanitizer) keeps one many-token case, 200 x 4 over 16 experts:
    // racecheck spends over a minute in cuBLASLt on the 600-token one.
    if (small_only() && (c.D == 6144 || c.T * c.k > 1000)) continue;
    Pair logits = rand({c.T, c.E}, 3.0f, DType::F32);
    const RouteParams rp{c.k, 1, 1, true, 2.5f};
    ops::Routing rc = ops::moe_route(cpu_ws_, logits.cpu, Tensor(), rp);
    ops::Routing rg{rc.idx.to(Device::cuda()), rc.weights.to(Device::cuda())};
    Pair x = rand({c.T, c.D});
    Pair gu = rand({c.E, 2 * c.I, c.D}, 0.08f), dn = rand({c.E, c.D, c.I}, 0.08f);
    const std::string what =
        "T=" + std::to_string(c.T) + " E=" + std::to_string(c.E) + " D=" + std::to_string(c.D);
    const Tensor want = ops::moe_experts(cpu_ws_, x.cpu, gu.cpu, dn.cpu, rc);
    // With the grouped wgmma kernels off, the many-token cases take the host path.
    cuda::cuda_backend()->set_moe_wgmma(0);
    for (bool tc : {true, false}) {  // the tensor-core expert kernels (where they apply) and SIMT
      cuda::cuda_backend()->set_moe_tensor_cores(tc);
      expect_close(ops::moe_experts(gpu_ws_, x.gpu, gu.gpu, dn.gpu, rg), want, kMoe,
                   tc ? "moe_experts" : "moe_experts (simt)", what);
    }
    cuda::cuda_backend()->set_moe_tensor_cores(-1);
    cuda::cuda_backend()->set_moe_wgmma(1);  // and the wgmma kernels at every size
    expect_close(ops::moe_experts(gpu_ws_, x.gpu, gu.gpu, dn.gpu, rg), want, kMoe,
                 "moe_experts (wgmma)", what);
    cuda::cuda_backend()->set_moe_wgmma(-1);
  }
}

// The grouped wgmma expert GEMMs (moe_wgmma.cu) over edge shapes: K not a multiple of the
// 64-wide stage (zero-filled by TMA), I not a multiple of the 64 gate columns of a tile (the gate
// half of the last tile reaches into the up rows), experts with no rows, one row, exactly 64 / 256
// rows and more than one 256-row tile.
TEST_F(CudaOps, MoeExpertsWgmmaEdgeShapes) {
  struct Case {
    int64_t T, E, k, D, I;
    const char* why;
  };
  const std::vector<Case> cases = {
      {1, 16, 4, 256, 128, "one token"},
      {20, 64, 2, 128, 64, "40 pairs over 64 experts: most have no rows"},
      {64, 4, 4, 192, 128, "every expert exactly 64 rows"},
      {256, 2, 2, 64, 64, "every expert exactly 256 rows"},
      {300, 4, 4, 200, 72, "300 rows per expert (two tiles), K tail, I tail"},
      {257, 3, 3, 136, 24, "257 rows per expert, I below one tile"},
      {300, 8, 2, 1024, 512, "75 rows per expert, uneven"},
      // The token halves' widths (16 to 128 in steps of 16) over a spread of row counts.
      {90, 30, 4, 128, 64, "12 rows per expert: one 16-wide half"},
      {600, 12, 3, 128, 192, "150 rows per expert: halves of 64 to 128"},
      {500, 10, 4, 64, 128, "200 rows per expert, K of one stage"},
  };
  cuda::cuda_backend()->set_moe_wgmma(1);
  for (const Case& c : cases) {
    if (small_only() && c.T * c.k > 600) continue;
    Pair logits = rand({c.T, c.E}, 3.0f, DType::F32);
    const RouteParams rp{c.k, 1, 1, true, 2.5f};
    ops::Routing rc = ops::moe_route(cpu_ws_, logits.cpu, Tensor(), rp);
    ops::Routing rg{rc.idx.to(Device::cuda()), rc.weights.to(Device::cuda())};
    Pair x = rand({c.T, c.D});
    Pair gu = rand({c.E, 2 * c.I, c.D}, 0.08f), dn = rand({c.E, c.D, c.I}, 0.08f);
    const std::string what = std::string(c.why) + " (T=" + std::to_string(c.T) +
                             " E=" + std::to_string(c.E) + " D=" + std::to_string(c.D) +
                             " I=" + std::to_string(c.I) + ")";
    const Tensor want = ops::moe_experts(cpu_ws_, x.cpu, gu.cpu, dn.cpu, rc);
    expect_close(ops::moe_experts(gpu_ws_, x.gpu, gu.gpu, dn.gpu, rg), want, kMoe,
                 "moe_experts (wgmma)", what);
  }
  cuda::cuda_backend()->set_moe_wgmma(-1);
}

// Last (gtest runs a file's tests in order): the per-op table.
TEST_F(CudaOps, ZzSummaryTable) {
  std::printf("\nOPS SUMMARY (CUDA vs CPU)\n%-22s %6s %12s %10s %s\n", "op", "cases", "max err",
              "threshold", "result");
  for (const auto& [op, r] : ErrorTable::get().rows)
    std::printf("%-22s %6d %12.3e %10.1e %s\n", op.c_str(), r.cases, r.worst, r.tol,
                r.failures ? "FAIL" : "ok");
  std::printf(
      "(ids rows: max err = number of differing indices; attention/norm rows: relative L2)\n");
  // The table is the suite's own evidence: every op it lists was compared, none failed.
  EXPECT_FALSE(ErrorTable::get().rows.empty()) << "no op was compared";
  for (const auto& [op, r] : ErrorTable::get().rows) {
    EXPECT_GT(r.cases, 0) << op;
    EXPECT_EQ(r.failures, 0) << op << ": " << r.failures << " cases over " << r.tol;
  }
}

}  // namespace
}  // namespace tandem::test

// The draft loop's device copy (cudaMemcpyAsync on the backend's stream): exact, into a row view
// of a larger buffer, for the i32 draft tokens and bf16 activations.
namespace tandem::test {
namespace {

TEST_F(CudaOps, CopyIntoRowViews) {
  Pair am = ints({5, 0, 154879, 17, 3});
  Pair drafts = ints(std::vector<int32_t>(15, -1), {3, 5});  // [steps, batch]
  for (Tensor* t : {&drafts.gpu, &drafts.cpu}) {
    Tensor row = t->select(0, 1);
    ops::copy(t == &drafts.gpu ? am.gpu : am.cpu, row);
  }
  expect_equal_ints(drafts.gpu, drafts.cpu, "copy", "i32 row of [3, 5]");
  Pair h = rand({7, 640});
  Tensor hg = Tensor::zeros({7, 640}, DType::BF16, Device::cuda());
  ops::copy(h.gpu, hg);
  expect_close(hg, h.cpu, 0, "copy", "bf16 [7, 640]");
}

}  // namespace
}  // namespace tandem::test
