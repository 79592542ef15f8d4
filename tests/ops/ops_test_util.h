// Helpers for the CUDA-vs-CPU op tests: paired random inputs (the CPU sees the exact values the
// GPU sees: bf16-rounded, in f32), a workspace that poisons every GPU output before the op runs,
// paged attention metadata on both devices, and a per-op error table printed at the end.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/init.h"
#include "core/device.h"
#include "core/rng.h"
#include "ops/ops.h"

namespace tandem::test {

// The mla_decode kernels the tests walk through (docs/cuda-backend.md): 16 heads a block on
// mma.sync, 64 heads on mma.sync, 64 heads on warpgroup MMA, SIMT, and the chain of kernels that
// gives the warpgroup-MMA kernel's one-split bits (where it fits; else that kernel).
enum class MlaKernel { kMma16, kMma64, kWgmma64, kSimt, kChain };
inline void use_mla_kernel(MlaKernel k) {
  cuda::CudaBackend* b = cuda::cuda_backend();
  const bool wgmma = k == MlaKernel::kWgmma64 || k == MlaKernel::kChain;
  b->set_mla_tensor_cores(k != MlaKernel::kSimt);
  b->set_mla_wide(k == MlaKernel::kMma64 || wgmma ? 1 : 0);
  b->set_mla_wgmma(wgmma);
  b->set_mla_chain(k == MlaKernel::kChain ? 1 : 0);
}
// Back to the automatic choice after a walk.
inline void use_automatic_mla_kernel() {
  cuda::CudaBackend* b = cuda::cuda_backend();
  b->set_mla_tensor_cores(true);
  b->set_mla_wide(-1);
  b->set_mla_wgmma(true);
  b->set_mla_chain(-1);
}

// Every GPU output starts as NaN (floats) or 0x7f7f7f7f (ints): an element the op forgets to
// write shows up as NaN or as an impossible index.
class PoisonWorkspace final : public Workspace {
 public:
  PoisonWorkspace() : Workspace(Device::cuda()) {}
  Tensor alloc(const Shape& shape, DType dtype) override {
    Tensor t = Tensor::empty(shape, dtype, Device::cuda());
    const int v = dtype == DType::I32 ? 0x7f : 0xff;
    device_interface(DeviceType::CUDA)
        .memset(Device::cuda(), t.raw(), v, static_cast<size_t>(t.nbytes()));
    return t;
  }
};

// The same values on both sides: cpu is f32, gpu is bf16 (or f32 where the op keeps f32).
struct Pair {
  Tensor cpu, gpu;
  Pair narrow(int d, int64_t s, int64_t n) const {
    return {cpu.narrow(d, s, n), gpu.narrow(d, s, n)};
  }
  Pair view(const Shape& s) const { return {cpu.view(s), gpu.view(s)}; }
};

// Max over the cases of one op, printed as a table by the last test.
struct ErrorTable {
  struct Row {
    double worst = 0;
    double tol = 0;
    int cases = 0;
    int failures = 0;
  };
  std::map<std::string, Row> rows;
  void add(const std::string& op, double err, double tol, bool ok) {
    Row& r = rows[op];
    r.worst = std::max(r.worst, err);
    r.tol = tol;
    ++r.cases;
    r.failures += ok ? 0 : 1;
  }
  static ErrorTable& get() {
    static ErrorTable t;
    return t;
  }
};

struct CompareResult {
  double rel = 0;
  int64_t nan = 0;
};

// ||gpu - cpu|| / ||cpu|| over all elements; NaN in the GPU output is counted separately.
inline CompareResult compare(const std::vector<float>& gpu, const std::vector<float>& cpu) {
  CompareResult r;
  double num = 0, den = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    if (std::isnan(gpu[i]) && !std::isnan(cpu[i])) {
      ++r.nan;
      continue;
    }
    const double d = static_cast<double>(gpu[i]) - cpu[i];
    num += d * d;
    den += static_cast<double>(cpu[i]) * cpu[i];
  }
  r.rel = std::sqrt(num / std::max(den, 1e-30));
  if (r.nan) r.rel = INFINITY;
  return r;
}

// Checks gpu against cpu within tol (relative L2), records the error under `op`.
inline void expect_close(const Tensor& gpu, const Tensor& cpu, double tol, const std::string& op,
                         const std::string& what) {
  const std::vector<float> g = to_float_vector(gpu);
  const std::vector<float> c = to_float_vector(cpu.contiguous());
  ASSERT_EQ(g.size(), c.size()) << op << " " << what;
  ASSERT_FALSE(c.empty()) << op << " " << what << ": nothing to compare";
  const CompareResult r = compare(g, c);
  const bool ok = r.nan == 0 && r.rel <= tol;
  ErrorTable::get().add(op, r.rel, tol, ok);
  EXPECT_EQ(r.nan, 0) << op << " " << what << ": " << r.nan
                      << " NaN (unwritten or invalid) elements";
  EXPECT_LE(r.rel, tol) << op << " " << what << ": rel err " << r.rel;
}

inline void expect_equal_ints(const Tensor& gpu, const Tensor& cpu, const std::string& op,
                              const std::string& what) {
  const std::vector<int32_t> g = to_int_vector(gpu), c = to_int_vector(cpu);
  ASSERT_EQ(g.size(), c.size()) << op << " " << what;
  ASSERT_FALSE(c.empty()) << op << " " << what << ": nothing to compare";
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < g.size(); ++i)
    if (g[i] != c[i]) {
      if (first < 0) first = static_cast<int64_t>(i);
      ++bad;
    }
  ErrorTable::get().add(op, static_cast<double>(bad), 0, bad == 0);
  EXPECT_EQ(bad, 0) << op << " " << what << ": " << bad << " of " << g.size()
                    << " differ, first at " << first << " (gpu " << (first >= 0 ? g[first] : 0)
                    << ", cpu " << (first >= 0 ? c[first] : 0) << ")";
}

// TANDEM_OPS_SMALL=1 skips the real-dimension cases (for runs under compute-sanitizer).
inline bool small_only() {
  const char* e = std::getenv("TANDEM_OPS_SMALL");
  return e && *e && *e != '0';
}

class CudaOps : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { has_gpu_ = init_backends(); }
  void SetUp() override {
    if (!has_gpu_) GTEST_SKIP() << "no CUDA device";
  }

  // Uniform in [-scale, scale), rounded to bf16 when gpu_dt is BF16.
  Pair rand(const Shape& s, float scale = 1.0f, DType gpu_dt = DType::BF16) {
    Tensor h = Tensor::empty(s, DType::F32);
    float* p = h.data<float>();
    const int64_t n = h.numel();
    for (int64_t i = 0; i < n; i += 4) {
      const uint64_t z = rng_.next_u64();
      for (int j = 0; j < 4 && i + j < n; ++j)
        p[i + j] =
            (static_cast<float>((z >> (16 * j)) & 0xffff) * (2.0f / 65536.0f) - 1.0f) * scale;
    }
    if (gpu_dt == DType::BF16) h = h.to_dtype(DType::BF16).to_f32();
    return {h, gpu_dt == DType::BF16 ? h.to_dtype(DType::BF16).to(Device::cuda())
                                     : h.to(Device::cuda())};
  }
  Pair ints(const std::vector<int32_t>& v, const Shape& s) {
    Tensor h = Tensor::from_vector(v, s);
    return {h, h.to(Device::cuda())};
  }
  Pair ints(const std::vector<int32_t>& v) { return ints(v, {static_cast<int64_t>(v.size())}); }

  // Paged metadata for sequences of the given lengths, each running its last q_per_seq[b]
  // positions as query tokens; pages are shuffled so sequences are not contiguous in the pool.
  struct Meta {
    AttentionMeta cpu, gpu;
    int64_t slots = 0;
    std::vector<int32_t> seq_of, pos_of, start;  // host copies
  };
  Meta make_meta(const std::vector<int32_t>& lens, const std::vector<int32_t>& q_per_seq,
                 int64_t page_size) {
    Meta m;
    const int64_t B = static_cast<int64_t>(lens.size());
    int64_t max_pages = 1, total_pages = 0, max_len = 0;
    for (int32_t l : lens) {
      max_pages = std::max<int64_t>(max_pages, (l + page_size - 1) / page_size);
      total_pages += (l + page_size - 1) / page_size;
      max_len = std::max<int64_t>(max_len, l);
    }
    total_pages += 3;  // a few pages nobody owns
    std::vector<int32_t> order(static_cast<size_t>(total_pages));
    std::iota(order.begin(), order.end(), 0);
    for (size_t i = order.size() - 1; i > 0; --i)
      std::swap(order[i], order[rng_.next_u64() % (i + 1)]);
    std::vector<int32_t> table(static_cast<size_t>(B * max_pages), 0), slot_map;
    size_t next = 0;
    int32_t start = 0;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t np = (lens[b] + page_size - 1) / page_size;
      for (int64_t p = 0; p < np; ++p) table[b * max_pages + p] = order[next++];
      m.start.push_back(start);
      start += lens[b];
      for (int32_t i = lens[b] - q_per_seq[b]; i < lens[b]; ++i) {
        m.seq_of.push_back(static_cast<int32_t>(b));
        m.pos_of.push_back(i);
        slot_map.push_back(table[b * max_pages + i / page_size] * static_cast<int32_t>(page_size) +
                           static_cast<int32_t>(i % page_size));
      }
    }
    const int64_t T = static_cast<int64_t>(m.seq_of.size());
    auto both = [&](const std::vector<int32_t>& v, Shape s, Tensor& c, Tensor& g) {
      c = Tensor::from_vector(v, s);
      g = c.to(Device::cuda());
    };
    both(m.seq_of, {T}, m.cpu.token_seq, m.gpu.token_seq);
    both(m.pos_of, {T}, m.cpu.token_pos, m.gpu.token_pos);
    both(slot_map, {T}, m.cpu.slot_mapping, m.gpu.slot_mapping);
    both(table, {B, max_pages}, m.cpu.page_table, m.gpu.page_table);
    both(lens, {B}, m.cpu.seq_lens, m.gpu.seq_lens);
    m.cpu.page_size = m.gpu.page_size = page_size;
    m.cpu.max_seq_len = m.gpu.max_seq_len = max_len;
    m.slots = total_pages * page_size;
    return m;
  }

  Workspace cpu_ws_{Device::cpu()};
  PoisonWorkspace gpu_ws_;
  Rng rng_{20261130};
  static inline bool has_gpu_ = false;
};

}  // namespace tandem::test
