// Every CPU op against a naive double-precision loop, on fresh random inputs over a sweep of
// shapes (edge sizes included). The CPU backend is the oracle for CUDA, so it is checked first.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "backends/init.h"
#include "core/error.h"
#include "core/rng.h"
#include "ops/ops.h"
#include "paged_meta.h"

namespace tandem {
namespace {

struct OpsTest : ::testing::Test {
  Workspace ws{Device::cpu()};
  Rng rng{42};
  void SetUp() override { init_backends(); }
  Tensor randn(const Shape& s, double scale = 1.0) {
    Tensor t = Tensor::empty(s, DType::F32);
    for (int64_t i = 0; i < t.numel(); ++i)
      t.data<float>()[i] = static_cast<float>(scale * rng.normal());
    return t;
  }
  Tensor ints(const std::vector<int32_t>& v) {
    return Tensor::from_vector(v, {static_cast<int64_t>(v.size())});
  }
};

void expect_close(const Tensor& got, const std::vector<double>& want, double tol,
                  const char* what) {
  const auto g = to_float_vector(got);
  ASSERT_EQ(g.size(), want.size()) << what;
  ASSERT_FALSE(g.empty()) << what << ": empty output compares as error 0";
  double num = 0, den = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_FALSE(std::isnan(g[i])) << what << " NaN at " << i;
    num += (g[i] - want[i]) * (g[i] - want[i]);
    den += want[i] * want[i];
  }
  ASSERT_GT(den, 0.0) << what << ": all-zero reference";
  EXPECT_LT(std::sqrt(num / den), tol) << what;
}

TEST_F(OpsTest, NormsEmbeddingElementwise) {
  for (int64_t T : {1, 3, 17}) {
    for (int64_t D : {1, 7, 64, 130}) {
      Tensor big = randn({T, D + 5});
      Tensor x = big.narrow(1, 2, D);  // strided rows
      Tensor w = randn({D}), b = randn({D});
      std::vector<double> rms, ln;
      for (int64_t t = 0; t < T; ++t) {
        double ss = 0, mean = 0;
        for (int64_t i = 0; i < D; ++i)
          ss += std::pow(big.data<float>()[t * (D + 5) + 2 + i], 2),
              mean += big.data<float>()[t * (D + 5) + 2 + i];
        mean /= D;
        double var = 0;
        for (int64_t i = 0; i < D; ++i)
          var += std::pow(big.data<float>()[t * (D + 5) + 2 + i] - mean, 2);
        var /= D;
        for (int64_t i = 0; i < D; ++i) {
          const double v = big.data<float>()[t * (D + 5) + 2 + i];
          rms.push_back(w.data<float>()[i] * v / std::sqrt(ss / D + 1e-6));
          ln.push_back((v - mean) / std::sqrt(var + 1e-5) * w.data<float>()[i] +
                       b.data<float>()[i]);
        }
      }
      expect_close(ops::rms_norm(ws, x, w, 1e-6f), rms, 1e-6, "rms_norm");
      expect_close(ops::layer_norm(ws, x, w, b, 1e-5f), ln, 1e-5, "layer_norm");
    }
  }
  Tensor table = randn({11, 6});
  Tensor e = ops::embedding(ws, ints({3, 0, 10, 3}), table);
  std::vector<double> want;
  for (int id : {3, 0, 10, 3})
    for (int i = 0; i < 6; ++i) want.push_back(table.data<float>()[id * 6 + i]);
  expect_close(e, want, 1e-12, "embedding");
  EXPECT_THROW(ops::embedding(ws, ints({11}), table), Error);

  Tensor gu = randn({5, 18});
  std::vector<double> sm;
  for (int t = 0; t < 5; ++t)
    for (int i = 0; i < 9; ++i) {
      const double g = gu.data<float>()[t * 18 + i], u = gu.data<float>()[t * 18 + 9 + i];
      sm.push_back(g / (1 + std::exp(-g)) * u);
    }
  expect_close(ops::silu_mul(ws, gu), sm, 1e-6, "silu_mul");
  Tensor a = randn({4, 3}), c = randn({4, 5});
  Tensor cat = ops::concat_cols(ws, a, c);
  EXPECT_EQ(cat.data<float>()[1 * 8 + 3], c.data<float>()[5]);
  Tensor g = ops::gather_rows(ws, c, ints({3, 3, 0}));
  EXPECT_EQ(g.data<float>()[0], c.data<float>()[15]);
  EXPECT_EQ(g.data<float>()[10], c.data<float>()[0]);
  Tensor logits = Tensor::from_vector(std::vector<float>{1, 5, 5, -2, 0, 0, 0, 0}, {2, 4});
  EXPECT_EQ(to_int_vector(ops::argmax(ws, logits)),
            (std::vector<int32_t>{1, 0}));  // lowest index wins ties
}

TEST_F(OpsTest, RopeBothPairings) {
  for (bool inter : {true, false}) {
    for (int64_t d : {2, 8, 64}) {
      const int64_t T = 5, H = 3;
      Tensor x = randn({T, H, d + 4}).narrow(2, 4, d);  // the rope slice of wider heads
      Tensor orig = x.contiguous().clone();
      std::vector<float> inv(d / 2);
      for (int64_t j = 0; j < d / 2; ++j) inv[j] = static_cast<float>(std::pow(1e4, -2.0 * j / d));
      Tensor pos = ints({0, 1, 7, 100, 4000});
      ops::rope(x, pos, Tensor::from_vector(inv, {d / 2}), RopeParams{inter, 1.25f});
      std::vector<double> want(T * H * d);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t j = 0; j < d / 2; ++j) {
            const double ang = static_cast<float>(pos.data<int32_t>()[t]) * inv[j];
            const int64_t i0 = inter ? 2 * j : j, i1 = inter ? 2 * j + 1 : j + d / 2;
            const double a = orig.data<float>()[(t * H + h) * d + i0],
                         b = orig.data<float>()[(t * H + h) * d + i1];
            want[(t * H + h) * d + i0] = 1.25 * (a * std::cos(ang) - b * std::sin(ang));
            want[(t * H + h) * d + i1] = 1.25 * (b * std::cos(ang) + a * std::sin(ang));
          }
      expect_close(x.contiguous(), want, 1e-5, "rope");
    }
  }
}

TEST_F(OpsTest, LinearAndHeadMatmul) {
  for (int64_t T : {1, 2, 33, 70}) {
    for (int64_t K : {1, 15, 16, 17, 100}) {
      const int64_t N = 13;
      Tensor x = randn({T, K}), w = randn({N, K});
      std::vector<double> want;
      for (int64_t t = 0; t < T; ++t)
        for (int64_t n = 0; n < N; ++n) {
          double s = 0;
          for (int64_t k = 0; k < K; ++k)
            s += static_cast<double>(x.data<float>()[t * K + k]) * w.data<float>()[n * K + k];
          want.push_back(s);
        }
      expect_close(ops::linear(ws, x, Weight::from_dense(w)), want, 1e-6, "linear");
    }
  }
  const int64_t T = 3, H = 4, K = 9, N = 5;
  Tensor x = randn({T, H, K + 2}).narrow(2, 1, K), w = randn({H, N, K});
  std::vector<double> want;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k)
          s += static_cast<double>(x.data<float>()[t * H * (K + 2) + h * (K + 2) + k]) *
               w.data<float>()[(h * N + n) * K + k];
        want.push_back(s);
      }
  expect_close(ops::head_matmul(ws, x, w), want, 1e-6, "head_matmul");
  // Into the first N columns of wider rows, the other columns left as they were.
  Tensor wide = randn({T, H, N + 3});
  const std::vector<float> before = to_float_vector(wide);
  Tensor cols = wide.narrow(2, 0, N);
  ops::head_matmul_into(x, w, cols);
  const std::vector<float> got = to_float_vector(wide);
  std::vector<double> got_cols;
  for (int64_t th = 0; th < T * H; ++th) {
    for (int64_t n = 0; n < N; ++n) got_cols.push_back(got[th * (N + 3) + n]);
    for (int64_t n = N; n < N + 3; ++n) EXPECT_EQ(got[th * (N + 3) + n], before[th * (N + 3) + n]);
  }
  expect_close(Tensor::from_vector(std::vector<float>(got_cols.begin(), got_cols.end()),
                                   {static_cast<int64_t>(got_cols.size())}),
               want, 1e-6, "head_matmul_into");
}

TEST_F(OpsTest, KvStoreGatherAndAbsorbedAttention) {
  const std::vector<int64_t> lens = {1, 9, 23}, news = {1, 3, 5};
  for (int64_t ps : {1, 4, 16}) {
    Paged p = make_paged(lens, news, ps);
    const int64_t S = 64, L = 12, Lc = 8, H = 3, T = p.m.num_tokens();
    Tensor pool = randn({S, L});
    Tensor rows = randn({T, L});
    ops::kv_store(rows, p.m, pool);
    const int64_t total = 1 + 9 + 23;
    Tensor g = ops::kv_gather(ws, pool, p.m, total);
    int64_t r = 0;
    for (int b = 0; b < 3; ++b)
      for (int64_t j = 0; j < lens[b]; ++j, ++r)
        for (int64_t i = 0; i < L; ++i)
          ASSERT_EQ(g.data<float>()[r * L + i], pool.data<float>()[p.slot(b, j) * L + i]);
    // Dense and sparse (with -1 padding and unsorted entries) absorbed attention.
    Tensor q = randn({T, H, L});
    std::vector<int32_t> sel;
    const int64_t K = 4;
    for (int64_t t = 0; t < T; ++t) {
      const int32_t pos = p.m.token_pos.data<int32_t>()[t];
      std::vector<int32_t> s = {pos, pos / 2, 0, -1};
      std::set<int32_t> uniq(s.begin(), s.end());
      s.assign(uniq.rbegin(), uniq.rend());
      s.resize(K, -1);
      sel.insert(sel.end(), s.begin(), s.end());
    }
    Tensor topk = Tensor::from_vector(sel, {T, K});
    for (bool sparse : {false, true}) {
      Tensor out = ops::mla_decode(ws, q, pool, p.m, sparse ? topk : Tensor(), 0.3f, Lc);
      std::vector<double> want;
      for (int64_t t = 0; t < T; ++t) {
        const int b = p.m.token_seq.data<int32_t>()[t];
        const int32_t pos = p.m.token_pos.data<int32_t>()[t];
        std::vector<int32_t> keys;
        if (sparse) {
          for (int64_t k = 0; k < K; ++k)
            if (sel[t * K + k] >= 0) keys.push_back(sel[t * K + k]);
        } else {
          for (int32_t j = 0; j <= pos; ++j) keys.push_back(j);
        }
        for (int64_t h = 0; h < H; ++h) {
          std::vector<double> sc;
          double mx = -1e300, sum = 0;
          for (int32_t j : keys) {
            double s = 0;
            for (int64_t i = 0; i < L; ++i)
              s += static_cast<double>(q.data<float>()[(t * H + h) * L + i]) *
                   pool.data<float>()[p.slot(b, j) * L + i];
            sc.push_back(0.3 * s);
            mx = std::max(mx, sc.back());
          }
          for (double& s : sc) sum += (s = std::exp(s - mx));
          for (int64_t i = 0; i < Lc; ++i) {
            double o = 0;
            for (size_t k = 0; k < keys.size(); ++k)
              o += sc[k] / sum * pool.data<float>()[p.slot(b, keys[k]) * L + i];
            want.push_back(o);
          }
        }
      }
      expect_close(out, want, 1e-5, sparse ? "mla_decode sparse" : "mla_decode dense");
    }
  }
}

TEST_F(OpsTest, NaivePrefillAttention) {
  const std::vector<int64_t> lens = {5, 12}, news = {5, 4};  // second sequence has a cached prefix
  Paged p = make_paged(lens, news, 4);
  const int64_t H = 2, dn = 6, dr = 4, dv = 5, T = p.m.num_tokens(), total = 17;
  Tensor q = randn({T, H, dn + dr}), kv = randn({total, H, dn + dv}),
         kpe = randn({total, dr + 3}).narrow(1, 3, dr);
  Tensor out = ops::mla_prefill(ws, q, kv, kpe, p.m, Tensor(), 0.5f, dv);
  std::vector<double> want;
  const int64_t start[2] = {0, 5};
  for (int64_t t = 0; t < T; ++t) {
    const int b = p.m.token_seq.data<int32_t>()[t];
    const int32_t pos = p.m.token_pos.data<int32_t>()[t];
    for (int64_t h = 0; h < H; ++h) {
      std::vector<double> sc;
      double mx = -1e300, sum = 0;
      for (int32_t j = 0; j <= pos; ++j) {
        const int64_t r = start[b] + j;
        double s = 0;
        for (int64_t i = 0; i < dn; ++i)
          s += static_cast<double>(q.data<float>()[(t * H + h) * (dn + dr) + i]) *
               kv.data<float>()[(r * H + h) * (dn + dv) + i];
        for (int64_t i = 0; i < dr; ++i)
          s += static_cast<double>(q.data<float>()[(t * H + h) * (dn + dr) + dn + i]) *
               kpe.data<float>()[r * (dr + 3) + i];
        sc.push_back(0.5 * s);
        mx = std::max(mx, sc.back());
      }
      for (double& s : sc) sum += (s = std::exp(s - mx));
      for (int64_t i = 0; i < dv; ++i) {
        double o = 0;
        for (int32_t j = 0; j <= pos; ++j)
          o += sc[j] / sum * kv.data<float>()[((start[b] + j) * H + h) * (dn + dv) + dn + i];
        want.push_back(o);
      }
    }
  }
  expect_close(out, want, 1e-5, "mla_prefill");
}

TEST_F(OpsTest, IndexerTopK) {
  const std::vector<int64_t> lens = {3, 30}, news = {3, 6};
  Paged p = make_paged(lens, news, 8);
  const int64_t Hi = 3, Di = 8, K = 5, T = p.m.num_tokens();
  Tensor pool = randn({64, Di}), q = randn({T, Hi, Di}), w = randn({T, Hi});
  Tensor idx = ops::indexer_topk(ws, q, w, pool, p.m, K);
  for (int64_t t = 0; t < T; ++t) {
    const int b = p.m.token_seq.data<int32_t>()[t];
    const int32_t pos = p.m.token_pos.data<int32_t>()[t];
    std::vector<std::pair<double, int32_t>> sc;
    for (int32_t j = 0; j <= pos; ++j) {
      double s = 0;
      for (int64_t h = 0; h < Hi; ++h) {
        double d = 0;
        for (int64_t i = 0; i < Di; ++i)
          d += static_cast<double>(q.data<float>()[(t * Hi + h) * Di + i]) *
               pool.data<float>()[p.slot(b, j) * Di + i];
        s += w.data<float>()[t * Hi + h] * std::max(d, 0.0);
      }
      sc.emplace_back(-s, j);
    }
    std::sort(sc.begin(), sc.end());
    std::vector<int32_t> want;
    for (int64_t k = 0; k < std::min<int64_t>(K, pos + 1); ++k) want.push_back(sc[k].second);
    std::sort(want.begin(), want.end());
    want.resize(K, -1);
    std::vector<int32_t> got(idx.data<int32_t>() + t * K, idx.data<int32_t>() + (t + 1) * K);
    EXPECT_EQ(got, want) << "token " << t;
  }
}

TEST_F(OpsTest, MoeRoutingAndExperts) {
  for (int64_t groups : {1, 4}) {
    const int64_t T = 7, E = 16, k = 4, D = 10, I = 6;
    Tensor logits = randn({T, E}, 2.0), bias = randn({E}, 0.1);
    const RouteParams rp{k, groups, groups > 1 ? 2 : 1, true, 2.5f};
    ops::Routing r = ops::moe_route(ws, logits, bias, rp);
    for (int64_t t = 0; t < T; ++t) {
      std::vector<double> s(E), ch(E);
      for (int64_t e = 0; e < E; ++e) {
        s[e] = 1 / (1 + std::exp(-static_cast<double>(logits.data<float>()[t * E + e])));
        ch[e] = s[e] + bias.data<float>()[e];
      }
      if (groups > 1) {
        std::vector<std::pair<double, int>> gs;
        for (int g = 0; g < groups; ++g) {
          std::vector<double> v(ch.begin() + g * (E / groups), ch.begin() + (g + 1) * (E / groups));
          std::sort(v.rbegin(), v.rend());
          gs.emplace_back(-(v[0] + v[1]), g);
        }
        std::sort(gs.begin(), gs.end());
        for (size_t i = 2; i < gs.size(); ++i)
          for (int64_t e = gs[i].second * (E / groups); e < (gs[i].second + 1) * (E / groups); ++e)
            ch[e] = -1e300;
      }
      std::vector<int> order(E);
      std::iota(order.begin(), order.end(), 0);
      std::sort(order.begin(), order.end(), [&](int a, int b) { return ch[a] > ch[b]; });
      double sum = 0;
      for (int j = 0; j < k; ++j) sum += s[order[j]];
      for (int j = 0; j < k; ++j) {
        EXPECT_EQ(r.idx.data<int32_t>()[t * k + j], order[j]);
        EXPECT_NEAR(r.weights.data<float>()[t * k + j], s[order[j]] / sum * 2.5, 1e-5);
      }
    }
    Tensor x = randn({T, D}), gate_up = randn({E, 2 * I, D}), down = randn({E, D, I});
    Tensor y = ops::moe_experts(ws, x, gate_up, down, r);
    std::vector<double> want(T * D, 0.0);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < k; ++j) {
        const int e = r.idx.data<int32_t>()[t * k + j];
        std::vector<double> h(I);
        for (int64_t i = 0; i < I; ++i) {
          double g = 0, u = 0;
          for (int64_t c = 0; c < D; ++c) {
            g += static_cast<double>(gate_up.data<float>()[(e * 2 * I + i) * D + c]) *
                 x.data<float>()[t * D + c];
            u += static_cast<double>(gate_up.data<float>()[(e * 2 * I + I + i) * D + c]) *
                 x.data<float>()[t * D + c];
          }
          h[i] = g / (1 + std::exp(-g)) * u;
        }
        for (int64_t c = 0; c < D; ++c) {
          double o = 0;
          for (int64_t i = 0; i < I; ++i) o += down.data<float>()[(e * D + c) * I + i] * h[i];
          want[t * D + c] += r.weights.data<float>()[t * k + j] * o;
        }
      }
    expect_close(y, want, 1e-5, "moe_experts");
  }
}

TEST_F(OpsTest, ShapeErrorsNameTheDimension) {
  Tensor x = randn({3, 8}), w = randn({7});
  try {
    ops::rms_norm(ws, x, w, 1e-6f);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[D]"), std::string::npos) << e.what();
  }
}

// The draft loop's device copy: any dtype, views that are contiguous, and clear errors for
// anything else.
TEST_F(OpsTest, CopyBetweenContiguousTensors) {
  Tensor am = ints({7, 0, 271, 3});
  Tensor drafts = Tensor::zeros({3, 4}, DType::I32);  // [steps, batch]
  Tensor row = drafts.select(0, 1);
  ops::copy(am, row);
  EXPECT_EQ(to_int_vector(drafts), std::vector<int32_t>({0, 0, 0, 0, 7, 0, 271, 3, 0, 0, 0, 0}));
  Tensor h = randn({5, 6}), h2 = Tensor::zeros({5, 6}, DType::F32);
  ops::copy(h, h2);
  EXPECT_EQ(to_float_vector(h2), to_float_vector(h));
  auto error_of = [](auto fn) {
    try {
      fn();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  Tensor f = Tensor::zeros({4}, DType::F32), five = Tensor::zeros({5}, DType::I32);
  EXPECT_NE(error_of([&] { ops::copy(am, f); }).find("dtypes differ"), std::string::npos);
  EXPECT_NE(error_of([&] { ops::copy(am, five); }).find("shapes differ"), std::string::npos);
  Tensor col = drafts.select(1, 0);  // stride 4
  Tensor three = ints({1, 2, 3});
  EXPECT_NE(error_of([&] { ops::copy(three, col); }).find("contiguous"), std::string::npos);
}

// Row-strided [R, C] views (the absorbed query's rope columns into its [T * H, 576] rows): every
// row's C values land in place, the columns around them are untouched.
TEST_F(OpsTest, CopyBetweenRowStridedViews) {
  for (int64_t R : {1, 3, 64}) {
    Tensor src_rows = randn({R, 10}), dst_rows = randn({R, 7});
    const std::vector<float> before = to_float_vector(dst_rows);
    Tensor src = src_rows.narrow(1, 6, 4), dst = dst_rows.narrow(1, 2, 4);  // strides 10 and 7
    ops::copy(src, dst);
    const std::vector<float> s = to_float_vector(src_rows), d = to_float_vector(dst_rows);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < 7; ++c)
        EXPECT_EQ(d[r * 7 + c], c >= 2 && c < 6 ? s[r * 10 + 6 + c - 2] : before[r * 7 + c])
            << "row " << r << " col " << c;
  }
  Tensor a = randn({2, 3, 4});
  Tensor b = Tensor::zeros({2, 3, 8}, DType::F32).narrow(2, 0, 4);  // 3-D, not [R, C]
  EXPECT_THROW(ops::copy(a, b), Error);
}

}  // namespace
}  // namespace tandem
