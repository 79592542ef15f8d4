// Batch invariance of the CUDA ops that decode and speculative verify share: a token's output row
// must be bit-identical whether the op runs it alone (decode) or among S + 1 tokens of its
// sequence and other sequences' tokens (verify), or greedy speculation is not lossless. Checked
// bitwise on fresh random inputs over a sweep of row counts in deterministic mode (cuBLASLt's
// batch-invariant algorithms for every bf16 and f32 product, and their fallbacks, the
// tensor-core GEMM and the skinny kernel; fixed mla_decode splits), plus the skinny kernel's f32
// products, invariant in both modes (in default mode below the rows where f32 products go to
// cuBLASLt); and both deterministic GEMM paths against the CPU.
#include <algorithm>
#include <cstring>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/kernels.h"
#include "ops_test_util.h"

namespace tandem::test {
namespace {

constexpr double kBf16Out = 5e-3;
constexpr double kF32Out = 1e-4;

// Restores the default mode whatever a test does. lt: deterministic products on cuBLASLt's
// batch-invariant algorithms (the default) or on the fallback kernels.
struct DeterministicScope {
  explicit DeterministicScope(bool on, bool lt = true) {
    cuda::cuda_backend()->set_deterministic(on);
    cuda::cuda_backend()->set_invariant_cublaslt(lt);
  }
  ~DeterministicScope() {
    cuda::cuda_backend()->set_deterministic(false);
    cuda::cuda_backend()->set_invariant_cublaslt(true);
  }
};
const char* path_name(bool lt) {
  return lt ? "cuBLASLt invariant" : "fallback kernels";
}

// Row r of `part` ([rows, N]) equals row r of `full` bit for bit; returns the first bad row or -1.
int64_t first_differing_row(const Tensor& part, const Tensor& full, int64_t rows) {
  const std::vector<float> a = to_float_vector(part), b = to_float_vector(full);
  const int64_t N = part.numel() / rows;
  for (int64_t r = 0; r < rows; ++r)
    if (std::memcmp(a.data() + r * N, b.data() + r * N, static_cast<size_t>(N) * 4) != 0) return r;
  return -1;
}

TEST_F(CudaOps, DeterministicLinearMatchesCpu) {
  struct Shape2 {
    int64_t N, K;
  };
  // GLM-5.2 projections, odd N (not a multiple of the 16-row tile), K not a multiple of the
  // 32-wide step, tiny K (fewer steps than warps).
  const std::vector<Shape2> shapes = {{2048, 6144}, {576, 6144}, {6144, 2048}, {1000, 640},
                                      {77, 264},    {13, 40},    {300, 8}};
  const std::vector<int64_t> ms = {1, 2, 5, 8, 9, 16, 17, 31, 32, 33, 63, 64, 65, 130};
  for (bool lt : {true, false}) {
    DeterministicScope scope(true, lt);
    for (const Shape2& s : shapes)
      for (int64_t M : ms) {
        if (small_only() && M * s.N * s.K > (int64_t{16} << 20)) continue;
        Pair x = rand({M, s.K});
        Pair w = rand({s.N, s.K}, 0.05f);
        const std::string what = std::string(path_name(lt)) + " " + std::to_string(M) + "x" +
                                 std::to_string(s.N) + "x" + std::to_string(s.K);
        const Tensor want =
            ops::linear(cpu_ws_, x.cpu, Weight{w.cpu, {}, WeightFormat::kDense}, DType::F32);
        for (DType out : {DType::BF16, DType::F32})
          expect_close(ops::linear(gpu_ws_, x.gpu, Weight{w.gpu, {}, WeightFormat::kDense}, out),
                       want, out == DType::F32 ? kF32Out : kBf16Out,
                       out == DType::F32 ? "deterministic linear f32 out" : "deterministic linear",
                       what);
      }
  }
}

// The same rows alone and inside every larger M give the same bits.
void check_linear_rows(PoisonWorkspace& ws, const Pair& x, const Tensor& w,
                       const std::vector<int64_t>& ms, DType out, const std::string& what) {
  const Weight wt{w, {}, WeightFormat::kDense};
  const int64_t Mmax = ms.back();
  const Tensor full = ops::linear(ws, x.gpu.narrow(0, 0, Mmax), wt, out);
  for (int64_t M : ms) {
    const Tensor part = ops::linear(ws, x.gpu.narrow(0, 0, M), wt, out);
    const int64_t bad = first_differing_row(part, full.narrow(0, 0, M).contiguous(), M);
    EXPECT_EQ(bad, -1) << what << ": row " << bad << " of M=" << M << " differs from M=" << Mmax;
  }
}

TEST_F(CudaOps, LinearRowsAreBatchInvariant) {
  // f32 weights (router, indexer head weights): the skinny family, in default mode below
  // heuristics::kF32SplitMinRows (from there the exact bf16 split on a cuBLASLt GEMM, whose
  // algorithm depends on M, for prefill-sized batches) and at any M in deterministic mode.
  for (bool det : {false, true}) {
    DeterministicScope scope(det, false);
    const int64_t top = det ? 300 : cuda::heuristics::kF32SplitMinRows - 1;
    const std::vector<int64_t> mf = {1, 3, 16, 17, 64, top};
    Pair x = rand({300, 6144});
    Pair w = rand({256, 6144}, 0.05f, DType::F32);
    check_linear_rows(gpu_ws_, x, w.gpu, mf, DType::F32,
                      std::string("f32 router 256x6144, ") + (det ? "deterministic" : "default"));
  }
  // f32 weights through prefill sizes on the skinny family (every tile shape of
  // skinny_f32_tiles.cu on the way): the router's and the indexer's shapes in deterministic mode,
  // the indexer's in default mode below kF32SplitMinRowsNarrow (the split from there).
  {
    Pair x = rand({2100, 6144});
    const std::vector<int64_t> ms = {1, 2, 3, 5, 8, 16, 32, 64, 129, 300, 1100, 2100};
    const int64_t narrow_top = cuda::heuristics::kF32SplitMinRowsNarrow - 1;
    const std::vector<int64_t> ms_default = {1, 2, 3, 5, 8, 16, 32, 64, 129, 300, narrow_top};
    for (int64_t N : {256, 32}) {
      Pair w = rand({N, 6144}, 0.05f, DType::F32);
      for (bool det : {true, false}) {
        if (!det && N > cuda::heuristics::kF32SkinnyMaxFeatures) continue;
        DeterministicScope scope(det, true);
        check_linear_rows(
            gpu_ws_, x, w.gpu, det ? ms : ms_default, DType::F32,
            "f32 " + std::to_string(N) + "x6144, " + (det ? "deterministic" : "default"));
      }
    }
  }
  // Deterministic mode, bf16 weights, on both paths: every M, and for cuBLASLt every row bucket
  // (each times its own candidates and may run a different tile: the bits must not change); for
  // the tensor-core kernel every tile configuration, with and without K splits (N = 576:
  // split-K; 16384: none); GLM-5.2's o_proj (K = 16384, where the default pick splits K).
  for (bool lt : {true, false}) {
    DeterministicScope scope(true, lt);
    const std::vector<int64_t> ms =
        lt ? std::vector<int64_t>{1, 2, 3, 4, 5, 8, 12, 16, 17, 32, 33, 64, 65, 128, 200, 300, 700}
           : std::vector<int64_t>{1, 2, 4, 5, 8, 12, 16, 17, 32, 33, 64, 65, 128, 200, 300};
    for (auto [N, K] : std::vector<std::pair<int64_t, int64_t>>{
             {1536, 2048}, {576, 6144}, {16384, 512}, {77, 264}, {6144, 16384}}) {
      if (!lt && K == 16384) continue;
      Pair x = rand({ms.back(), K});
      Pair w = rand({N, K}, 0.05f);
      const std::string what = std::string("deterministic, ") + path_name(lt) + ", bf16 " +
                               std::to_string(N) + "x" + std::to_string(K);
      check_linear_rows(gpu_ws_, x, w.gpu, ms, DType::BF16, what);
      check_linear_rows(gpu_ws_, x, w.gpu, ms, DType::F32, what + ", f32 out");
    }
  }
}

// fp32 weights: every tile shape of skinny_f32_tiles gives the 2-rows-a-warp skinny kernel's bits
// (one reduction order, whatever the shape chosen for M), with the K splits reduced by each
// tile's last block or by the second kernel, bf16 and f32 out. Shapes: the router and the
// indexer's head weights (K split 6 ways), N not a multiple of any tile, K with a partial last
// 128-wide step in the last split (1000), K under one step (40), no splits (N = 4096).
TEST_F(CudaOps, SkinnyF32TilesGiveTheSkinnyBits) {
  const int num_sms = cuda::cuda_backend()->num_sms();
  const std::vector<std::pair<int64_t, int64_t>> shapes = {
      {256, 6144}, {32, 6144}, {77, 1000}, {5, 40}, {4096, 2048}};
  const std::vector<int64_t> ms = {1, 2, 3, 5, 8, 13, 16, 31, 33, 64, 100};
  Tensor counters = Tensor::from_vector(std::vector<int32_t>(1 << 16, 0), {int64_t{1} << 16})
                        .to(Device::cuda());  // [65536], left zeroed by every launch
  for (auto [N, K] : shapes) {
    Pair w = rand({N, K}, 0.05f, DType::F32);
    Pair x = rand({ms.back(), K});
    for (int64_t M : ms) {
      if (small_only() && M * N * K > (int64_t{16} << 20)) continue;
      for (DType odt : {DType::F32, DType::BF16}) {
        cuda::k::SkinnyParams p;
        p.x = x.gpu.raw(), p.x_rs = K;
        p.w = w.gpu.raw();
        p.M = M, p.N = N, p.K = K;
        p.o_rs = N;
        p.splits = cuda::k::skinny_splits(p, cuda::k::DT::F32, num_sms);
        Tensor part = Tensor::empty({std::max<int64_t>(1, p.splits * M * N)}, DType::F32,
                                    Device::cuda());  // [splits, M, N]
        p.partial = part.data<float>();
        const cuda::k::DT kdt = odt == DType::F32 ? cuda::k::DT::F32 : cuda::k::DT::BF16;
        auto run = [&](int shape, bool with_counters) {
          Tensor out = Tensor::empty({M, N}, odt, Device::cuda());  // [M, N]
          p.out = out.raw();
          p.f32_tile = shape;
          // (The backend uses counters only where they suffice, as here.)
          p.counters = with_counters && cuda::k::skinny_tiles(p, cuda::k::DT::F32) <= (1 << 16)
                           ? counters.data<int32_t>()
                           : nullptr;
          cuda::k::skinny_gemm(p, cuda::k::DT::F32, kdt, nullptr);
          EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          return out;
        };
        const Tensor want = run(-2, false);
        const std::string what = std::to_string(M) + "x" + std::to_string(N) + "x" +
                                 std::to_string(K) + " (" + std::to_string(p.splits) +
                                 " splits), " + (odt == DType::F32 ? "f32" : "bf16") + " out";
        for (int shape = -1; shape < cuda::k::skinny_f32_tile_shapes(); ++shape)
          for (bool c : {false, true}) {
            const int64_t bad = first_differing_row(run(shape, c), want, M);
            EXPECT_EQ(bad, -1) << what << ", tile " << cuda::k::skinny_f32_tile_name(shape)
                               << (c ? ", last-block reduce" : ", second kernel") << ": row " << bad
                               << " differs from the skinny kernel's";
          }
        if (odt == DType::F32)
          expect_close(run(-1, true),
                       ops::linear(cpu_ws_, x.cpu.narrow(0, 0, M),
                                   Weight{w.cpu, {}, WeightFormat::kDense}, DType::F32),
                       kF32Out, "skinny f32 tiles", what);
      }
    }
  }
}

TEST_F(CudaOps, HeadMatmulRowsAreBatchInvariant) {
  for (bool lt : {true, false}) {
    DeterministicScope scope(true, lt);
    const std::vector<int64_t> ts = {1, 4, 17, 33, 100};
    const int64_t Tmax = ts.back();
    Pair q = rand({Tmax, 64, 256});
    Pair wuk = rand({64, 512, 192}, 0.1f);
    const Tensor full = ops::head_matmul(gpu_ws_, q.gpu.narrow(2, 0, 192), wuk.gpu);
    for (int64_t T : ts) {
      const Tensor part =
          ops::head_matmul(gpu_ws_, q.gpu.narrow(0, 0, T).narrow(2, 0, 192), wuk.gpu);
      const int64_t bad = first_differing_row(part, full.narrow(0, 0, T).contiguous(), T);
      EXPECT_EQ(bad, -1) << "head_matmul W_UK T=" << T << " deterministic, " << path_name(lt);
      expect_close(part,
                   ops::head_matmul(cpu_ws_, q.cpu.narrow(0, 0, T).narrow(2, 0, 192), wuk.cpu),
                   kBf16Out, "head_matmul deterministic", "T=" + std::to_string(T));
    }
  }
}

// For each query position: a shuffled subset of [0, pos] (at most K), padded with -1.
std::vector<int32_t> random_topk_rows(Rng& rng, const std::vector<int32_t>& pos_of, int64_t K) {
  std::vector<int32_t> out;
  for (int32_t pos : pos_of) {
    std::vector<int32_t> all(static_cast<size_t>(pos + 1));
    for (int32_t i = 0; i <= pos; ++i) all[static_cast<size_t>(i)] = i;
    for (size_t i = all.size() - 1; i > 0; --i) std::swap(all[i], all[rng.next_u64() % (i + 1)]);
    all.resize(static_cast<size_t>(std::min<int64_t>(K, pos + 1)));
    all.resize(static_cast<size_t>(K), -1);
    out.insert(out.end(), all.begin(), all.end());
  }
  return out;
}

// Deterministic mla_decode: each of a sequence's S + 1 verify tokens gives the same bits as that
// token decoded alone (one query token, its own sequence length), dense and top-k sparse.
TEST_F(CudaOps, MlaDecodeVerifyEqualsDecodeWhenDeterministic) {
  DeterministicScope scope(true);
  if (small_only()) GTEST_SKIP() << "GLM-5.2 dimensions";
  const int64_t H = 64, L = 576, Lc = 512, Q = 4;
  // The 16-head kernel, the 64-head one on mma.sync and wgmma (one split), the chain (the
  // automatic choice here for both 1 and 4 tokens).
  for (int wide : {0, 1, 2, 4})
    for (int64_t K : {int64_t{0}, int64_t{2048}}) {
      use_mla_kernel(static_cast<MlaKernel>(wide));
      for (int32_t len : {700, 3000}) {
        Meta m = make_meta({len}, {static_cast<int32_t>(Q)}, 64);
        Pair pool = rand({m.slots, L});
        Pair q = rand({Q, H, L});
        Pair topk;
        if (K) topk = ints(random_topk_rows(rng_, m.pos_of, K), {Q, K});
        const float scale = 1.0f / std::sqrt(static_cast<float>(L));
        const Tensor verify = ops::mla_decode(gpu_ws_, q.gpu, pool.gpu, m.gpu, topk.gpu, scale, Lc);
        for (int64_t j = 0; j < Q; ++j) {
          AttentionMeta one = m.gpu;
          const int32_t pos = m.pos_of[static_cast<size_t>(j)];
          one.token_seq = m.gpu.token_seq.narrow(0, j, 1);
          one.token_pos = m.gpu.token_pos.narrow(0, j, 1);
          one.slot_mapping = m.gpu.slot_mapping.narrow(0, j, 1);
          one.seq_lens = Tensor::from_vector(std::vector<int32_t>{pos + 1}, {1}).to(Device::cuda());
          one.max_seq_len = pos + 1;
          const Tensor tk = K ? topk.gpu.narrow(0, j, 1) : Tensor();
          const Tensor alone =
              ops::mla_decode(gpu_ws_, q.gpu.narrow(0, j, 1), pool.gpu, one, tk, scale, Lc);
          const int64_t bad = first_differing_row(alone, verify.narrow(0, j, 1).contiguous(), 1);
          EXPECT_EQ(bad, -1) << "mla_decode" << (wide == 1 ? " (64 heads)" : "")
                             << (wide == 2 ? " (wgmma, 64 heads)" : "")
                             << (wide == 4 ? " (chain)" : "") << " len " << len
                             << (K ? " sparse" : " dense") << " token " << j
                             << ": alone differs from verify";
        }
      }
    }
  use_automatic_mla_kernel();
}

// The wgmma kernel's column parts (blocks that own 512, 256 or 128 of the value columns; in
// deterministic mode the plan picks more parts for fewer tokens) give the same bits: every part
// computes the same scores and softmax. Both modes, dense and top-2048 sparse, one to 150 query
// tokens (the automatic choice changes from 4 parts to 1 across that range).
TEST_F(CudaOps, MlaDecodeColumnPartsGiveTheSameBits) {
  if (small_only()) GTEST_SKIP() << "GLM-5.2 dimensions";
  const int64_t H = 64, L = 576, Lc = 512;
  use_mla_kernel(MlaKernel::kWgmma64);
  cuda::CudaBackend* b = cuda::cuda_backend();
  struct Case {
    std::vector<int32_t> lens, q;
  };
  const std::vector<Case> cases = {{{3000}, {1}}, {{700, 2600}, {4, 4}}, {{2500, 1200}, {75, 75}}};
  for (bool det : {true, false}) {
    DeterministicScope scope(det);
    for (const Case& c : cases)
      for (int64_t K : {int64_t{0}, int64_t{2048}}) {
        Meta m = make_meta(c.lens, c.q, 64);
        const int64_t T = m.cpu.num_tokens();
        Pair pool = rand({m.slots, L});
        Pair q = rand({T, H, L});
        Pair topk;
        if (K) topk = ints(random_topk_rows(rng_, m.pos_of, K), {T, K});
        const float scale = 1.0f / std::sqrt(static_cast<float>(L));
        b->set_mla_column_parts(1);
        const Tensor one = ops::mla_decode(gpu_ws_, q.gpu, pool.gpu, m.gpu, topk.gpu, scale, Lc);
        for (int parts : {2, 4, 0}) {
          b->set_mla_column_parts(parts);
          const Tensor got = ops::mla_decode(gpu_ws_, q.gpu, pool.gpu, m.gpu, topk.gpu, scale, Lc);
          EXPECT_EQ(first_differing_row(got, one, T), -1)
              << (det ? "deterministic" : "default") << " T=" << T << (K ? " sparse" : " dense")
              << ": " << (parts ? std::to_string(parts) : std::string("automatic"))
              << " column parts differ from one";
        }
      }
  }
  b->set_mla_column_parts(0);
  use_automatic_mla_kernel();
}

// The chain of kernels (attention_chain.cu) gives the one-split wgmma kernel's bits: deterministic
// mode runs the chain for few tokens and the one-block kernel for many, so a token's row must not
// depend on which. Dense and sparse (top-2048, and a 1,000-wide top-k whose last block is
// partial), edge lengths (one key, 64, 65), one to 60 query tokens (the scores kernel's two
// shapes), column parts of the one-block kernel 1 and automatic, the chain's values kernel on 64,
// 32 and 16 value columns a block (m64n64k16, m64n32k16 and m64n16k16 over 128-, 64- and 32-byte
// swizzled value rows); close to the CPU as well.
TEST_F(CudaOps, MlaDecodeChainGivesTheOneBlockBits) {
  if (small_only()) GTEST_SKIP() << "GLM-5.2 dimensions";
  DeterministicScope scope(true);
  const int64_t H = 64, L = 576, Lc = 512;
  cuda::CudaBackend* b = cuda::cuda_backend();
  use_mla_kernel(MlaKernel::kWgmma64);
  struct Case {
    std::vector<int32_t> lens, q;
  };
  const std::vector<Case> cases = {{{3000}, {1}},
                                   {{700, 2600}, {4, 4}},
                                   {{1, 64, 65, 90}, {1, 1, 2, 1}},
                                   {{2500, 1200}, {30, 30}}};
  for (const Case& c : cases)
    for (int64_t K : {int64_t{0}, int64_t{2048}, int64_t{1000}}) {
      Meta m = make_meta(c.lens, c.q, 64);
      const int64_t T = m.cpu.num_tokens();
      Pair pool = rand({m.slots, L});
      Pair q = rand({T, H, L});
      Pair topk;
      if (K) topk = ints(random_topk_rows(rng_, m.pos_of, K), {T, K});
      const float scale = 1.0f / std::sqrt(static_cast<float>(L));
      const std::string what = "T=" + std::to_string(T) + " len0=" + std::to_string(c.lens[0]) +
                               (K ? " top-" + std::to_string(K) : std::string(" dense"));
      b->set_mla_chain(1);
      b->set_mla_chain_value_cols(64);
      const Tensor chain = ops::mla_decode(gpu_ws_, q.gpu, pool.gpu, m.gpu, topk.gpu, scale, Lc);
      for (int cols : {32, 16}) {
        b->set_mla_chain_value_cols(cols);
        const Tensor narrow = ops::mla_decode(gpu_ws_, q.gpu, pool.gpu, m.gpu, topk.gpu, scale, Lc);
        const int64_t bad = first_differing_row(narrow, chain, T);
        EXPECT_EQ(bad, -1) << what << ": the chain on " << cols << " value columns a block, row "
                           << bad << " differs from 64";
      }
      b->set_mla_chain_value_cols(0);  // automatic again
      b->set_mla_chain(0);
      for (int parts : {1, 0}) {
        b->set_mla_column_parts(parts);
        const Tensor one = ops::mla_decode(gpu_ws_, q.gpu, pool.gpu, m.gpu, topk.gpu, scale, Lc);
        const int64_t bad = first_differing_row(chain, one, T);
        EXPECT_EQ(bad, -1) << what << ", column parts " << parts << ": the chain's row " << bad
                           << " differs from the one-block kernel's";
      }
      b->set_mla_column_parts(0);
      expect_close(chain, ops::mla_decode(cpu_ws_, q.cpu, pool.cpu, m.cpu, topk.cpu, scale, Lc),
                   1e-2, "mla_decode chain", what);  // the attention tolerance of cuda_ops_test
    }
  use_automatic_mla_kernel();
}

// A top-k row that lists every visible position in order and pads with -1 (what the indexer
// writes while a sequence is shorter than K) gives the same bits as dense attention: the kernels
// skip the chunks of the -1 tail, which must leave the running softmax and output unchanged.
TEST_F(CudaOps, MlaDecodeIdentityTopkEqualsDense) {
  DeterministicScope scope(true);
  if (small_only()) GTEST_SKIP() << "GLM-5.2 dimensions";
  const int64_t H = 64, L = 576, Lc = 512, K = 2048;
  Meta m = make_meta({700, 90, 1500}, {4, 1, 4}, 64);
  const int64_t T = m.cpu.num_tokens();
  std::vector<int32_t> rows;
  for (int32_t pos : m.pos_of)
    for (int32_t i = 0; i < K; ++i) rows.push_back(i <= pos ? i : -1);
  Pair topk = ints(rows, {T, K});
  Pair pool = rand({m.slots, L});
  Pair q = rand({T, H, L});
  const float scale = 1.0f / std::sqrt(static_cast<float>(L));
  const char* names[] = {"mma", "mma 64 heads", "wgmma 64 heads", "simt", "chain"};
  for (int kernel = 0; kernel < 5; ++kernel) {
    use_mla_kernel(static_cast<MlaKernel>(kernel));
    const Tensor dense = ops::mla_decode(gpu_ws_, q.gpu, pool.gpu, m.gpu, Tensor(), scale, Lc);
    const Tensor sparse = ops::mla_decode(gpu_ws_, q.gpu, pool.gpu, m.gpu, topk.gpu, scale, Lc);
    const int64_t bad = first_differing_row(sparse, dense, T);
    EXPECT_EQ(bad, -1) << names[kernel] << ": token " << bad
                       << " with an identity top-k row differs from dense";
  }
  use_automatic_mla_kernel();
}

// moe_experts on the device path's earlier kernels (the grouped wgmma kernels off: the next test
// has those): a token's output is the same bits alone or among other tokens (its experts then
// have more rows), in both modes and on both expert kernels.
TEST_F(CudaOps, MoeExpertsRowsAreBatchInvariant) {
  const int64_t E = 16, k = 4, D = 512, I = 256;
  const std::vector<int64_t> ts = {1, 3, 17, 40};  // 40 x 4 pairs: below the host path
  const int64_t Tmax = ts.back();
  Pair logits = rand({Tmax, E}, 3.0f, DType::F32);
  ops::Routing r = ops::moe_route(cpu_ws_, logits.cpu, Tensor(), RouteParams{k, 1, 1, true, 2.5f});
  const Tensor idx = r.idx.to(Device::cuda()), w = r.weights.to(Device::cuda());
  Pair x = rand({Tmax, D});
  Pair gu = rand({E, 2 * I, D}, 0.08f), dn = rand({E, D, I}, 0.08f);
  cuda::cuda_backend()->set_moe_wgmma(0);
  for (bool det : {false, true})
    for (bool tc : {true, false}) {
      DeterministicScope scope(det);
      cuda::cuda_backend()->set_moe_tensor_cores(tc);
      const Tensor full = ops::moe_experts(gpu_ws_, x.gpu, gu.gpu, dn.gpu, ops::Routing{idx, w});
      for (int64_t T : ts) {
        const ops::Routing part{idx.narrow(0, 0, T), w.narrow(0, 0, T)};
        const Tensor out = ops::moe_experts(gpu_ws_, x.gpu.narrow(0, 0, T), gu.gpu, dn.gpu, part);
        const int64_t bad = first_differing_row(out, full.narrow(0, 0, T).contiguous(), T);
        EXPECT_EQ(bad, -1) << "moe_experts " << (tc ? "mma" : "simt")
                           << (det ? " deterministic" : "") << ": row " << bad << " of T=" << T
                           << " differs from T=" << Tmax;
      }
    }
  cuda::cuda_backend()->set_moe_tensor_cores(-1);
  cuda::cuda_backend()->set_moe_wgmma(-1);
}

// The grouped wgmma expert kernels: a token's rows are the same bits whatever its experts' row
// counts (up to two 256-row tiles per expert) and wherever in a tile they land, and replayed from
// a CUDA graph (the path has no host sync).
TEST_F(CudaOps, MoeWgmmaRowsAreBatchInvariant) {
  const int64_t E = 8, k = 4, D = 512, I = 256, T = 700;
  Pair logits = rand({T, E}, 3.0f, DType::F32);
  ops::Routing r = ops::moe_route(cpu_ws_, logits.cpu, Tensor(), RouteParams{k, 1, 1, true, 2.5f});
  const Tensor idx = r.idx.to(Device::cuda()), w = r.weights.to(Device::cuda());
  Pair x = rand({T, D});
  Pair gu = rand({E, 2 * I, D}, 0.08f), dn = rand({E, D, I}, 0.08f);
  cuda::cuda_backend()->set_moe_wgmma(1);
  const Tensor full = ops::moe_experts(gpu_ws_, x.gpu, gu.gpu, dn.gpu, ops::Routing{idx, w});
  for (int64_t n : {1, 3, 64, 301}) {
    const ops::Routing part{idx.narrow(0, 0, n), w.narrow(0, 0, n)};
    const Tensor out = ops::moe_experts(gpu_ws_, x.gpu.narrow(0, 0, n), gu.gpu, dn.gpu, part);
    EXPECT_EQ(first_differing_row(out, full.narrow(0, 0, n).contiguous(), n), -1)
        << "moe_experts wgmma: T=" << n << " differs from T=" << T;
  }
  // The last rows alone: they sit at other places in their experts' tiles.
  const int64_t t0 = T - 37;
  const Tensor tail = ops::moe_experts(gpu_ws_, x.gpu.narrow(0, t0, 37), gu.gpu, dn.gpu,
                                       ops::Routing{idx.narrow(0, t0, 37), w.narrow(0, t0, 37)});
  EXPECT_EQ(first_differing_row(tail, full.narrow(0, t0, 37).contiguous(), 37), -1)
      << "moe_experts wgmma: the last 37 tokens alone differ";
  expect_close(full, ops::moe_experts(cpu_ws_, x.cpu, gu.cpu, dn.cpu, r), 1.5e-2, "moe_experts",
               "wgmma, 700 tokens");
  // Captured into a CUDA graph and replayed into a poisoned output: the same bits.
  cuda::CudaBackend* be = cuda::cuda_backend();
  const Weight guw = Weight::from_dense(gu.gpu), dnw = Weight::from_dense(dn.gpu);
  Tensor out = Tensor::empty({T, D}, DType::BF16, Device::cuda());
  be->moe_experts(x.gpu, guw, dnw, idx, w, out);  // eager first: sizes the scratch
  cudaStream_t st;
  ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  const cudaStream_t prev = be->stream();
  be->set_stream(st);
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  be->moe_experts(x.gpu, guw, dnw, idx, w, out);
  ASSERT_EQ(cudaStreamEndCapture(st, &graph), cudaSuccess);
  be->set_stream(prev);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  // The poison on the replay's own stream: st does not wait for the legacy default stream, so a
  // cudaMemset there could land after the replay's stores (it did under compute-sanitizer
  // racecheck, whose slower kernels turned this test into "graph replay differs").
  ASSERT_EQ(cudaMemsetAsync(out.raw(), 0xff, out.nbytes(), st), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, st), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
  EXPECT_EQ(first_differing_row(out, full, T), -1) << "moe_experts wgmma: graph replay differs";
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(st);
  be->set_moe_wgmma(-1);
}

// moe_prepare's fused work for the wgmma path (the tile list always, the gather into expert
// order for few rows) gives the bits of the separate kernels: a sweep of token counts across the
// gather's 64 KB bound (64 pairs of 512 columns), an odd expert count (the tile list's
// alignment), x rows strided inside a wider tensor, and pairs routed to no local expert (-1:
// expert parallelism), which the gather must skip.
TEST_F(CudaOps, MoeFusedPrepareGivesTheSameBits) {
  const int64_t k = 4, D = 512, I = 256, T = 300;
  cuda::CudaBackend* b = cuda::cuda_backend();
  b->set_moe_wgmma(1);
  for (int64_t E : {8, 7})
    for (int64_t stride : {D, D + 64}) {
      Pair logits = rand({T, E}, 3.0f, DType::F32);
      ops::Routing r =
          ops::moe_route(cpu_ws_, logits.cpu, Tensor(), RouteParams{k, 1, 1, true, 2.5f});
      if (E == 7) {  // every 5th pair to another rank's expert
        int32_t* id = r.idx.data<int32_t>();
        for (int64_t p = 0; p < T * k; p += 5) id[p] = -1;
      }
      const Tensor idx = r.idx.to(Device::cuda()), w = r.weights.to(Device::cuda());
      Pair wide = rand({T, stride});
      const Tensor x = wide.gpu.narrow(1, 0, D);  // [T, D] rows `stride` apart
      Pair gu = rand({E, 2 * I, D}, 0.08f), dn = rand({E, D, I}, 0.08f);
      for (int64_t n : {1, 2, 4, 15, 16, 17, 33, 64, 300}) {
        const ops::Routing part{idx.narrow(0, 0, n), w.narrow(0, 0, n)};
        b->set_moe_fused_prepare(false);
        const Tensor sep = ops::moe_experts(gpu_ws_, x.narrow(0, 0, n), gu.gpu, dn.gpu, part);
        b->set_moe_fused_prepare(true);
        const Tensor fused = ops::moe_experts(gpu_ws_, x.narrow(0, 0, n), gu.gpu, dn.gpu, part);
        EXPECT_EQ(first_differing_row(fused, sep, n), -1)
            << "fused prepare: E=" << E << " x stride " << stride << " T=" << n
            << " differs from the separate kernels";
        if (n == 17 && E == 7 && stride == D + 64) {  // and both against the CPU
          const ops::Routing cpu_part{r.idx.narrow(0, 0, n), r.weights.narrow(0, 0, n)};
          expect_close(
              fused,
              ops::moe_experts(cpu_ws_, wide.cpu.narrow(1, 0, D).narrow(0, 0, n).contiguous(),
                               gu.cpu, dn.cpu, cpu_part),
              1.5e-2, "moe_experts", "fused prepare, 17 tokens, -1 pairs");
        }
      }
    }
  b->set_moe_fused_prepare(true);
  b->set_moe_wgmma(-1);
}

// The tensor-core expert kernels with four 16-row groups per pass over the weights (prefill
// sizes) give each row the bits of one-group passes, and so of decode: deterministic mode (the
// device path at every size), experts with 0 to ~150 rows, every row of a 400-token step
// checked against the same step with one group, and its first rows against a decode-sized step.
// (The grouped wgmma kernels, deterministic mode's choice, are off here: TANDEM_MOE_WGMMA=0.)
TEST_F(CudaOps, MoeExpertRowGroupsGiveTheSameBits) {
  const int64_t E = 16, k = 4, D = 512, I = 256, T = 400;
  Pair logits = rand({T, E}, 3.0f, DType::F32);
  ops::Routing r = ops::moe_route(cpu_ws_, logits.cpu, Tensor(), RouteParams{k, 1, 1, true, 2.5f});
  const Tensor idx = r.idx.to(Device::cuda()), w = r.weights.to(Device::cuda());
  Pair x = rand({T, D});
  Pair gu = rand({E, 2 * I, D}, 0.08f), dn = rand({E, D, I}, 0.08f);
  DeterministicScope scope(true);
  cuda::CudaBackend* b = cuda::cuda_backend();
  b->set_moe_wgmma(0);
  b->set_moe_row_groups(1);
  const Tensor one = ops::moe_experts(gpu_ws_, x.gpu, gu.gpu, dn.gpu, ops::Routing{idx, w});
  for (int groups : {4, 0}) {
    b->set_moe_row_groups(groups);
    const Tensor got = ops::moe_experts(gpu_ws_, x.gpu, gu.gpu, dn.gpu, ops::Routing{idx, w});
    EXPECT_EQ(first_differing_row(got, one, T), -1)
        << (groups ? "four row groups" : "the automatic choice") << " differ from one group";
  }
  b->set_moe_row_groups(0);
  const int64_t few = 5;  // 20 pairs over 16 experts: one group
  const Tensor part = ops::moe_experts(gpu_ws_, x.gpu.narrow(0, 0, few), gu.gpu, dn.gpu,
                                       ops::Routing{idx.narrow(0, 0, few), w.narrow(0, 0, few)});
  EXPECT_EQ(first_differing_row(part, one.narrow(0, 0, few).contiguous(), few), -1)
      << "a decode-sized step differs from the prefill-sized one";
  // And the four-group result against the CPU.
  const Tensor want = ops::moe_experts(cpu_ws_, x.cpu, gu.cpu, dn.cpu, r);
  b->set_moe_row_groups(4);
  expect_close(ops::moe_experts(gpu_ws_, x.gpu, gu.gpu, dn.gpu, ops::Routing{idx, w}), want, 1.5e-2,
               "moe_experts", "four row groups");  // bf16 h as well
  b->set_moe_row_groups(0);
  b->set_moe_wgmma(-1);
}

}  // namespace
}  // namespace tandem::test
