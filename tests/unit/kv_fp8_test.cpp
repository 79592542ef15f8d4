// The FP8 KV cache on the CPU (docs/kv-cache.md): the row formats byte by byte, quantization
// round trips, the Hadamard rotation, the ops reading FP8 pools against the f32 path over the
// dequantized rows, the FP8 indexer against a double-precision recomputation of the reference's
// fp8_index formula, and the tie rule with planted ties.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "backends/init.h"
#include "core/error.h"
#include "core/rng.h"
#include "model/kv_cache.h"
#include "model/presets.h"
#include "ops/kv_fp8.h"
#include "ops/ops.h"
#include "paged_meta.h"

namespace tandem {
namespace {

struct KvFp8 : ::testing::Test {
  Workspace ws{Device::cpu()};
  Rng rng{7};
  void SetUp() override { init_backends(); }
  // Normal values whose magnitude changes by `spread` decades along the row, so the tiles of
  // one row get different scales.
  Tensor randn(const Shape& s, double scale = 1.0, double spread = 0.0) {
    Tensor t = Tensor::empty(s, DType::F32);
    const int64_t w = s[s.ndim() - 1];
    for (int64_t i = 0; i < t.numel(); ++i)
      t.data<float>()[i] = static_cast<float>(
          scale * std::pow(10.0, spread * static_cast<double>(i % w) / w) * rng.normal());
    return t;
  }
};

float read_f32(const uint8_t* p) {
  float f;
  std::memcpy(&f, p, 4);
  return f;
}

TEST_F(KvFp8, RowSizesAndBytesPerToken) {
  EXPECT_EQ(kv_fp8::latent_row_bytes(512, 64), 656);
  EXPECT_EQ(kv_fp8::index_row_bytes(128), 132);
  EXPECT_EQ(kv_fp8::latent_row_bytes(32, 8), 32 + 4 + 16);    // one partial tile
  EXPECT_EQ(kv_fp8::latent_row_bytes(200, 8), 200 + 8 + 16);  // a full and a partial tile
  // docs/kv-cache.md: GLM-5.2 needs 78 x 656 + 21 x 132 bytes a token, plus the MTP layer.
  const ModelConfig c = preset_config("glm5.2");
  EXPECT_EQ(KvCache::bytes_per_token(c, DType::F8_E4M3, false), 78 * 656 + 21 * 132);
  EXPECT_EQ(KvCache::bytes_per_token(c, DType::F8_E4M3, true), 78 * 656 + 21 * 132 + 656 + 132);
  EXPECT_EQ(KvCache::bytes_per_token(c, DType::BF16, false), 78 * 1152 + 21 * 256);
}

TEST_F(KvFp8, Ue8m0ScaleIsTheNextPowerOfTwo) {
  EXPECT_EQ(kv_fp8::ue8m0_scale(448.0f), 1.0f);
  EXPECT_EQ(kv_fp8::ue8m0_scale(449.0f), 2.0f);
  EXPECT_EQ(kv_fp8::ue8m0_scale(224.0f), 0.5f);
  EXPECT_EQ(kv_fp8::ue8m0_scale(0.0f), kv_fp8::ue8m0_scale(1e-4f));  // the amax floor
  for (int i = 0; i < 2000; ++i) {
    const float amax = static_cast<float>(std::exp(rng.normal() * 8.0));
    const float s = kv_fp8::ue8m0_scale(amax);
    const double want = std::exp2(std::ceil(std::log2(std::max(amax, 1e-4f) / 448.0f)));
    ASSERT_EQ(s, static_cast<float>(want)) << "amax " << amax;
    ASSERT_LE(amax / s, 448.0f) << "amax " << amax;  // the tile never saturates
  }
}

// Every value of a quantized row: c_kv within half an e4m3 step of the original (relative 2^-4
// for normals, absolute 2^-10 * scale below 2^-6 * scale), k_pe exactly its bf16 rounding, the
// scales where the layout puts them.
TEST_F(KvFp8, LatentRowRoundTrip) {
  for (int64_t n : {32, 128, 200, 512}) {
    for (int64_t dr : {8, 64}) {
      Tensor x = randn({5, n + dr}, 3.0, 2.0);  // [5, n + dr]
      const int64_t RB = kv_fp8::latent_row_bytes(n, dr);
      std::vector<uint8_t> row(RB);
      std::vector<float> back(n + dr);
      for (int64_t r = 0; r < 5; ++r) {
        const float* xr = x.data<float>() + r * (n + dr);
        kv_fp8::quantize_latent_row(xr, n, dr, row.data());
        kv_fp8::dequantize_latent_row(row.data(), n, dr, back.data());
        for (int64_t t = 0; t < kv_fp8::latent_tiles(n); ++t) {
          float amax = 0;
          for (int64_t i = t * 128; i < std::min(n, t * 128 + 128); ++i)
            amax = std::max(amax, std::fabs(xr[i]));
          const float s = read_f32(row.data() + n + 4 * t);
          ASSERT_EQ(s, kv_fp8::ue8m0_scale(amax)) << "n " << n << " tile " << t;
          for (int64_t i = t * 128; i < std::min(n, t * 128 + 128); ++i) {
            const double err = std::fabs(static_cast<double>(back[i]) - xr[i]);
            const double bound = std::max(std::fabs(xr[i]) / 16.0, s / 1024.0);
            ASSERT_LE(err, bound * 1.0000001) << "n " << n << " value " << i << " = " << xr[i];
            ASSERT_EQ(static_cast<float>(fp8_e4m3_to_f32(row[i]) * s), back[i]);
          }
        }
        for (int64_t i = 0; i < dr; ++i) {
          ASSERT_EQ(back[n + i], bf16_to_f32(f32_to_bf16(xr[n + i]))) << "k_pe " << i;
          uint16_t h;
          std::memcpy(&h, row.data() + n + 4 * kv_fp8::latent_tiles(n) + 2 * i, 2);
          ASSERT_EQ(h, f32_to_bf16(xr[n + i]));
        }
      }
    }
  }
}

TEST_F(KvFp8, HadamardIsTheSylvesterTransform) {
  for (int64_t d : {2, 4, 16, 128}) {
    Tensor x = randn({d});
    std::vector<float> y(x.data<float>(), x.data<float>() + d);
    kv_fp8::hadamard(y.data(), d);
    // H[i][j] = (-1)^popcount(i & j) / sqrt(d): row 1 alternates signs (Sylvester order).
    for (int64_t i = 0; i < d; ++i) {
      double want = 0;
      for (int64_t j = 0; j < d; ++j)
        want += (__builtin_popcountll(i & j) % 2 ? -1.0 : 1.0) * x.data<float>()[j];
      want /= std::sqrt(static_cast<double>(d));
      ASSERT_NEAR(y[i], want, 1e-5 * std::sqrt(static_cast<double>(d))) << "d " << d << " i " << i;
    }
    kv_fp8::hadamard(y.data(), d);  // H is its own inverse
    for (int64_t i = 0; i < d; ++i) ASSERT_NEAR(y[i], x.data<float>()[i], 1e-5) << "d " << d;
  }
  float bad[3] = {1, 2, 3};
  EXPECT_THROW(kv_fp8::hadamard(bad, 3), Error);
}

TEST_F(KvFp8, IndexRowHoldsTheRotatedKey) {
  for (int64_t d : {16, 128}) {
    Tensor k = randn({d}, 4.0);
    std::vector<uint8_t> row(kv_fp8::index_row_bytes(d));
    kv_fp8::quantize_index_row(k.data<float>(), d, row.data());
    std::vector<float> rot(k.data<float>(), k.data<float>() + d), v(d);
    kv_fp8::hadamard(rot.data(), d);
    const float s = kv_fp8::read_index_row(row.data(), d, v.data());
    float amax = 0;
    for (float r : rot) amax = std::max(amax, std::fabs(r));
    EXPECT_EQ(s, kv_fp8::ue8m0_scale(amax));
    for (int64_t i = 0; i < d; ++i)
      ASSERT_LE(std::fabs(v[i] * s - rot[i]), std::max(std::fabs(rot[i]) / 16.0, s / 1024.0))
          << "d " << d << " value " << i;
  }
}

// mla_kv_store into an FP8 pool writes exactly the quantization of the row the f32 path stores;
// kv_gather_fp8 returns the dequantized rows; padding slots write nothing.
TEST_F(KvFp8, LatentStoreAndGather) {
  for (int64_t ps : {1, 4, 16}) {
    const std::vector<int64_t> lens = {1, 9, 23}, news = {1, 3, 5};
    Paged p = make_paged(lens, news, ps);
    const int64_t n = 32, dr = 8, T = p.m.num_tokens(), S = 64;
    const int64_t RB = kv_fp8::latent_row_bytes(n, dr);
    Tensor x = randn({T, n + dr}, 2.0), w = randn({n}, 1.0);
    std::vector<float> inv(dr / 2);
    for (int64_t j = 0; j < dr / 2; ++j) inv[j] = static_cast<float>(std::pow(1e4, -2.0 * j / dr));
    const Tensor invf = Tensor::from_vector(inv, {dr / 2});
    Tensor ref = Tensor::zeros({S, n + dr}, DType::F32);
    Tensor pool = Tensor::zeros({S, RB}, DType::F8_E4M3);
    std::vector<int32_t> slots = to_int_vector(p.m.slot_mapping);
    const int32_t skipped = slots[1];
    slots[1] = -1;  // a padding token
    p.m.slot_mapping = Tensor::from_vector(slots, {T});
    ops::mla_kv_store(x, w, 1e-6f, invf, RopeParams{}, p.m, ref);
    ops::mla_kv_store(x, w, 1e-6f, invf, RopeParams{}, p.m, pool);
    std::vector<uint8_t> want(RB);
    const std::set<int32_t> written(slots.begin(), slots.end());
    ASSERT_FALSE(written.count(skipped));
    for (int64_t s = 0; s < S; ++s) {
      const uint8_t* got = pool.data<uint8_t>() + s * RB;
      if (!written.count(static_cast<int32_t>(s))) {  // untouched, the padding token's included
        ASSERT_TRUE(std::all_of(got, got + RB, [](uint8_t b) { return b == 0; })) << "slot " << s;
        continue;
      }
      kv_fp8::quantize_latent_row(ref.data<float>() + s * (n + dr), n, dr, want.data());
      ASSERT_TRUE(std::equal(want.begin(), want.end(), got)) << "slot " << s << " page " << ps;
    }
    const Tensor g = ops::kv_gather_fp8(ws, pool, p.m, 33, n, dr, DType::F32);  // [33, n + dr]
    std::vector<float> row(n + dr);
    int64_t r = 0;
    for (int b = 0; b < 3; ++b)
      for (int64_t j = 0; j < lens[b]; ++j, ++r) {
        kv_fp8::dequantize_latent_row(pool.data<uint8_t>() + p.slot(b, j) * RB, n, dr, row.data());
        for (int64_t i = 0; i < n + dr; ++i) ASSERT_EQ(g.data<float>()[r * (n + dr) + i], row[i]);
      }
  }
}

// Decode/verify/draft attention over an FP8 pool equals, bit for bit, the f32 path over the
// dequantized rows (the dequantization is exact), dense and sparse, over page sizes.
TEST_F(KvFp8, DecodeAttentionReadsTheFp8Rows) {
  for (int64_t ps : {1, 4, 16}) {
    for (int64_t n : {32, 136}) {
      const std::vector<int64_t> lens = {1, 9, 23}, news = {1, 3, 5};
      Paged p = make_paged(lens, news, ps);
      const int64_t dr = 8, L = n + dr, H = 3, T = p.m.num_tokens(), S = 64;
      const int64_t RB = kv_fp8::latent_row_bytes(n, dr);
      Tensor src = randn({S, L}, 1.5, 1.0);
      Tensor pool = Tensor::empty({S, RB}, DType::F8_E4M3), deq = Tensor::empty({S, L}, DType::F32);
      for (int64_t s = 0; s < S; ++s) {
        kv_fp8::quantize_latent_row(src.data<float>() + s * L, n, dr,
                                    pool.data<uint8_t>() + s * RB);
        kv_fp8::dequantize_latent_row(pool.data<uint8_t>() + s * RB, n, dr,
                                      deq.data<float>() + s * L);
      }
      Tensor q = randn({T, H, L}, 0.5);
      std::vector<int32_t> sel;
      const int64_t K = 4;
      for (int64_t t = 0; t < T; ++t) {
        const int32_t pos = p.m.token_pos.data<int32_t>()[t];
        std::set<int32_t> u = {pos, pos / 2, pos / 3};
        std::vector<int32_t> s(u.begin(), u.end());
        s.resize(K, -1);
        sel.insert(sel.end(), s.begin(), s.end());
      }
      const Tensor topk = Tensor::from_vector(sel, {T, K});
      for (bool sparse : {false, true}) {
        const Tensor a = ops::mla_decode(ws, q, pool, p.m, sparse ? topk : Tensor(), 0.3f, n);
        const Tensor b = ops::mla_decode(ws, q, deq, p.m, sparse ? topk : Tensor(), 0.3f, n);
        EXPECT_EQ(to_float_vector(a), to_float_vector(b)) << "n " << n << " page " << ps;
        // And the quantization is visible: the f32 rows give a different, close result (the
        // keys' e4m3 rounding, up to 2^-4 relative, moves the sharp softmax by up to ~9% here).
        const Tensor c = ops::mla_decode(ws, q, src, p.m, sparse ? topk : Tensor(), 0.3f, n);
        const auto av = to_float_vector(a), cv = to_float_vector(c);
        double num = 0, den = 0;
        for (size_t i = 0; i < av.size(); ++i)
          num += (av[i] - cv[i]) * (av[i] - cv[i]), den += cv[i] * cv[i];
        EXPECT_GT(num, 0.0);
        EXPECT_LT(std::sqrt(num / den), 0.15) << "n " << n;
      }
    }
  }
}

// Scores of the reference fp8_index, in double from the stored bytes and from q rotated by the
// explicit Hadamard matrix: score(t, j) = k_s * sum_h w[h] * q_s[h] * relu(q8_h . k8).
std::vector<double> fp8_scores(const float* q, const float* w, int64_t Hi, int64_t Di,
                               const std::vector<const uint8_t*>& keys) {
  std::vector<std::vector<double>> q8(Hi, std::vector<double>(Di));
  std::vector<double> qs(Hi);
  for (int64_t h = 0; h < Hi; ++h) {
    std::vector<float> rot(Di);
    for (int64_t i = 0; i < Di; ++i) {
      double v = 0;
      for (int64_t j = 0; j < Di; ++j)
        v += (__builtin_popcountll(i & j) % 2 ? -1.0 : 1.0) * q[h * Di + j];
      rot[i] = static_cast<float>(v / std::sqrt(static_cast<double>(Di)));
    }
    float amax = 0;
    for (float v : rot) amax = std::max(amax, std::fabs(v));
    qs[h] = kv_fp8::ue8m0_scale(amax);
    for (int64_t i = 0; i < Di; ++i)
      q8[h][i] = fp8_e4m3_to_f32(f32_to_fp8_e4m3(rot[i] / static_cast<float>(qs[h])));
  }
  std::vector<double> out;
  std::vector<float> k8(Di);
  for (const uint8_t* row : keys) {
    const double ks = kv_fp8::read_index_row(row, Di, k8.data());
    double s = 0;
    for (int64_t h = 0; h < Hi; ++h) {
      double d = 0;
      for (int64_t i = 0; i < Di; ++i) d += q8[h][i] * k8[i];
      s += w[h] * qs[h] * std::max(d, 0.0);
    }
    out.push_back(ks * s);
  }
  return out;
}

// The FP8 indexer selects the top-K of the reference formula; a swap is tolerated only between
// scores within 1e-5 (relative) of the K-th, where fp32 summation order can decide.
TEST_F(KvFp8, IndexerMatchesTheReferenceFormula) {
  for (int64_t Di : {16, 64}) {
    const std::vector<int64_t> lens = {3, 30, 61}, news = {3, 6, 2};
    Paged p = make_paged(lens, news, 8);
    const int64_t Hi = 4, K = 7, T = p.m.num_tokens(), S = 8 * 14;
    Tensor keys = randn({T, Di}, 2.0);
    Tensor pool = Tensor::zeros({S, Di + 4}, DType::F8_E4M3);
    // Every slot written through the op (the new tokens) or by hand (the cached prefix).
    for (int64_t s = 0; s < S; ++s) {
      Tensor k = randn({Di}, 2.0);
      kv_fp8::quantize_index_row(k.data<float>(), Di, pool.data<uint8_t>() + s * (Di + 4));
    }
    ops::kv_store(keys, p.m, pool);
    Tensor q = randn({T, Hi, Di}), w = randn({T, Hi}, 0.3);
    const Tensor idx = ops::indexer_topk(ws, q, w, pool, p.m, K);
    int64_t checked = 0;
    for (int64_t t = 0; t < T; ++t) {
      const int b = p.m.token_seq.data<int32_t>()[t];
      const int32_t pos = p.m.token_pos.data<int32_t>()[t];
      std::vector<int32_t> got(idx.data<int32_t>() + t * K, idx.data<int32_t>() + (t + 1) * K);
      if (pos + 1 <= K) continue;  // everything visible is selected (checked by IndexerTopK)
      std::vector<const uint8_t*> rows;
      for (int32_t j = 0; j <= pos; ++j)
        rows.push_back(pool.data<uint8_t>() + p.slot(b, j) * (Di + 4));
      const std::vector<double> sc =
          fp8_scores(q.data<float>() + t * Hi * Di, w.data<float>() + t * Hi, Hi, Di, rows);
      std::vector<double> sorted = sc;
      std::sort(sorted.rbegin(), sorted.rend());
      const double kth = sorted[K - 1], tol = 1e-5 * std::fabs(sorted[0]);
      ASSERT_TRUE(std::is_sorted(got.begin(), got.end()));
      for (int32_t j : got) {
        ASSERT_GE(j, 0);
        ASSERT_GE(sc[j], kth - tol) << "token " << t << " picked " << j;
      }
      for (int32_t j = 0; j <= pos; ++j) {
        if (sc[j] > kth + tol) {
          ASSERT_TRUE(std::count(got.begin(), got.end(), j)) << "token " << t << " missed " << j;
        }
      }
      ++checked;
    }
    EXPECT_GT(checked, 5) << "Di " << Di;
  }
}

// Planted ties: every key is one of three rows, so scores tie exactly in groups, and the K-th
// place falls inside a group (K = 10: inside the best group; K = 20: inside the second). The
// selection must be the groups in score order, each group's positions earliest first, cut at K.
// Same answer for a token alone and in a batch of four, with f32 and FP8 pools.
TEST_F(KvFp8, TopKTiesGoToTheEarlierPosition) {
  const int64_t Hi = 2, Di = 16, len = 40;
  Tensor base = randn({3, Di}, 1.0);  // [3, Di]: the only key rows
  Tensor q = randn({4, Hi, Di}), w = randn({4, Hi}, 0.5);
  std::vector<int> group(len);
  for (int64_t j = 0; j < len; ++j) group[j] = static_cast<int>((j * 7) % 3);  // 14, 13, 13
  int checked = 0;
  for (int64_t K : {10, 20}) {
    for (bool fp8 : {false, true}) {
      std::vector<int32_t> alone;  // token 0's answer in a batch of one
      for (int64_t batch : {1, 4}) {
        std::vector<int64_t> lens(batch, len), news(batch, 1);
        Paged p = make_paged(lens, news, 8);
        const int64_t S = 8 * 5 * batch, RB = fp8 ? Di + 4 : Di;
        Tensor pool =
            fp8 ? Tensor::zeros({S, RB}, DType::F8_E4M3) : Tensor::zeros({S, RB}, DType::F32);
        std::vector<uint8_t> rows8(3 * (Di + 4));
        for (int g = 0; g < 3; ++g)
          kv_fp8::quantize_index_row(base.data<float>() + g * Di, Di, rows8.data() + g * (Di + 4));
        for (int64_t b = 0; b < batch; ++b)
          for (int64_t j = 0; j < len; ++j) {
            const int g = group[j];
            if (fp8)
              std::copy(rows8.data() + g * RB, rows8.data() + (g + 1) * RB,
                        pool.data<uint8_t>() + p.slot(static_cast<int>(b), j) * RB);
            else
              std::copy(base.data<float>() + g * Di, base.data<float>() + (g + 1) * Di,
                        pool.data<float>() + p.slot(static_cast<int>(b), j) * RB);
          }
        Tensor qb = q.narrow(0, 0, batch).contiguous(), wb = w.narrow(0, 0, batch).contiguous();
        const Tensor idx = ops::indexer_topk(ws, qb, wb, pool, p.m, K);
        for (int64_t t = 0; t < batch; ++t) {
          // The three group scores in double (f32: sum_h w relu(q . k); FP8: the reference).
          const float* qt = qb.data<float>() + t * Hi * Di;
          const float* wt = wb.data<float>() + t * Hi;
          std::vector<double> gs(3);
          if (fp8) {
            gs = fp8_scores(qt, wt, Hi, Di,
                            {rows8.data(), rows8.data() + RB, rows8.data() + 2 * RB});
          } else {
            for (int g = 0; g < 3; ++g)
              for (int64_t h = 0; h < Hi; ++h) {
                double d = 0;
                for (int64_t i = 0; i < Di; ++i)
                  d += static_cast<double>(qt[h * Di + i]) * base.data<float>()[g * Di + i];
                gs[g] += wt[h] * std::max(d, 0.0);
              }
          }
          // Positions by (score descending, position ascending): the rule, applied to the
          // planted ties (groups whose scores are equal, e.g. both zero, interleave by position).
          std::vector<int32_t> order(len);
          for (int32_t j = 0; j < len; ++j) order[j] = j;
          std::sort(order.begin(), order.end(), [&](int32_t x, int32_t y) {
            const double sx = gs[group[x]], sy = gs[group[y]];
            return sx > sy || (sx == sy && x < y);
          });
          std::vector<int32_t> want(order.begin(), order.begin() + K);
          std::sort(want.begin(), want.end());
          std::vector<int32_t> got(idx.data<int32_t>() + t * K, idx.data<int32_t>() + (t + 1) * K);
          const std::string what = std::string(fp8 ? "fp8" : "f32") + " K " + std::to_string(K) +
                                   " batch " + std::to_string(batch) + " token " +
                                   std::to_string(t);
          EXPECT_EQ(got, want) << what;
          ++checked;
          if (t == 0 && batch == 1) alone = got;
          if (t == 0 && batch == 4) {
            EXPECT_EQ(got, alone) << what << ": differs from alone";
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, 20);  // 2 K x 2 dtypes x (1 + 4) tokens
}

}  // namespace
}  // namespace tandem
