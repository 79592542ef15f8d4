// CudaBackend: moe_route, moe_experts (device path, host path with cuBLASLt per expert).
#include <algorithm>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_validate.h"
#include "backends/cuda/heuristics.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/lt_gemm.h"
#include "core/error.h"

namespace tandem::cuda {

using namespace check;
using k::DT;

void CudaBackend::moe_route(const Tensor& logits, const Tensor& bias, const RouteParams& p,
                            Tensor& idx, Tensor& weights) {
  need_dtype(logits, DType::F32, "moe_route", "logits");
  need_unit_last(logits, "moe_route", "logits");
  need_contiguous(idx, "moe_route", "idx");
  need_contiguous(weights, "moe_route", "weights");
  if (bias.defined()) need_f32_param(bias, "moe_route", "bias");
  k::moe_route(logits.data<float>(), logits.stride(0),
               bias.defined() ? bias.data<float>() : nullptr, logits.size(0), logits.size(1),
               p.top_k, p.n_group, p.topk_group, p.normalize, p.scaling, p.local_first,
               p.local_count, idx.data<int32_t>(), weights.data<float>(), stream_);
  TD_CUDA_LAUNCH_CHECK();
}

bool CudaBackend::moe_tensor_cores(int64_t pairs, int64_t experts) const {
  return heuristics::moe_tensor_cores(moe_tc_mode_, deterministic_, pairs, experts);
}

void CudaBackend::moe_experts(const Tensor& x, const Weight& gate_up_w, const Weight& down_w,
                              const Tensor& idx, const Tensor& weights, Tensor& out) {
  const char* op = "moe_experts";
  if (gate_up_w.quantized() || down_w.quantized()) {
    // FP8 block / MXFP4 experts stay quantized (cuda_quant.cpp).
    TD_CHECK(gate_up_w.quantized() && down_w.quantized(),
             "cuda moe_experts: gate_up ({}) and down ({}) must both be quantized or both dense",
             gate_up_w.w.str(), down_w.w.str());
    need_dtype(x, DType::BF16, op, "x");
    need_dtype(out, DType::BF16, op, "out");
    need_dtype(idx, DType::I32, op, "idx");
    need_dtype(weights, DType::F32, op, "weights");
    need_all_contiguous({&idx, &weights, &out}, op, "routing and out");
    need_unit_last(x, op, "x");
    need_vec(x, {x.stride(0)}, op, "x");
    const int64_t T = x.size(0), D = x.size(1), E = gate_up_w.experts(), I = down_w.in_features(),
                  kk = idx.size(1);
    if (T == 0) return;
    const int64_t Tc = heuristics::moe_token_chunk(T, D, I, kk);
    for (int64_t t0 = 0; t0 < T; t0 += Tc) {
      const int64_t n = std::min(Tc, T - t0);
      Tensor xo = out.narrow(0, t0, n);
      const bool host =
          heuristics::moe_host_path(n * kk, E, deterministic_, [this] { return capturing(); });
      quant_moe_chunk(x.narrow(0, t0, n), gate_up_w, down_w, idx.narrow(0, t0, n),
                      weights.narrow(0, t0, n), xo, host);
    }
    return;
  }
  const Tensor& gate_up = gate_up_w.w;
  const Tensor& down = down_w.w;
  need_dtype(x, DType::BF16, op, "x");
  need_dtype(gate_up, DType::BF16, op, "gate_up");
  need_dtype(down, DType::BF16, op, "down");
  need_dtype(out, DType::BF16, op, "out");
  need_dtype(idx, DType::I32, op, "idx");
  need_dtype(weights, DType::F32, op, "weights");
  need_all_contiguous({&gate_up, &down, &idx, &weights, &out}, op, "weights, routing and out");
  need_unit_last(x, op, "x");
  const int64_t T = x.size(0), D = x.size(1), E = gate_up.size(0), I = down.size(2),
                kk = idx.size(1);
  TD_CHECK(D % 8 == 0 && I % 8 == 0,
           "cuda moe_experts: hidden {} and expert intermediate {} must be multiples of 8", D, I);
  need_vec(x, {x.stride(0)}, op, "x");
  if (T == 0) return;
  const int64_t Tc = heuristics::moe_token_chunk(T, D, I, kk);
  for (int64_t t0 = 0; t0 < T; t0 += Tc) {
    const int64_t n = std::min(Tc, T - t0);
    Tensor xo = out.narrow(0, t0, n);
    const bool wgmma = moe_wgmma_path(n * kk, E, I, D);
    const bool host = !wgmma && heuristics::moe_host_path(n * kk, E, deterministic_,
                                                          [this] { return capturing(); });
    moe_chunk(x.narrow(0, t0, n), gate_up, down, idx.narrow(0, t0, n), weights.narrow(0, t0, n), xo,
              host, wgmma);
  }
}

bool CudaBackend::moe_wgmma_path(int64_t pairs, int64_t E, int64_t I, int64_t D) const {
  return k::moe_wgmma_applies(I, D) &&
         heuristics::moe_wgmma(moe_wgmma_mode_, deterministic_, pairs, E);
}

void CudaBackend::create_expert_streams() {
  if (expert_fork_) return;
  for (int s = 0; s < kExpertStreams; ++s) {
    TD_CUDA_CHECK(cudaStreamCreateWithFlags(&expert_streams_[s], cudaStreamNonBlocking));
    TD_CUDA_CHECK(cudaEventCreateWithFlags(&expert_events_[s], cudaEventDisableTiming));
  }
  TD_CUDA_CHECK(cudaEventCreateWithFlags(&expert_fork_, cudaEventDisableTiming));
}

bool CudaBackend::moe_host_grouped(const std::vector<int32_t>& cnt, const std::vector<int32_t>& off,
                                   const std::vector<int32_t>& inv_h,
                                   const std::vector<int32_t>& idx_h, const uint16_t* xs,
                                   const uint16_t* gu, const uint16_t* dn, uint16_t* g, uint16_t* h,
                                   float* y, int32_t* inv_pad, void** ptrs, int64_t D, int64_t I) {
  // Experts grouped by their row count rounded up to kGroupRows: one pointer-array batched
  // cuBLASLt GEMM per group for gate_up and one for down (about 20 launches at a 4,096-token
  // GLM-5.2 step, where one per expert took 512 and left the GPU half idle). Each expert's rows
  // get a padded slot of the group's row count in g, h and y; the GEMM reads that many rows of
  // xs from the expert's first (the rows past its own belong to the next experts or the margin:
  // their products land in the padding and are never read). moe_combine then reads y through
  // the pairs' padded rows.
  const int64_t E = static_cast<int64_t>(cnt.size());
  std::vector<int64_t> order;  // experts with rows, by padded row count
  for (int64_t e = 0; e < E; ++e)
    if (cnt[static_cast<size_t>(e)] > 0) order.push_back(e);
  if (order.empty()) return false;
  const auto padded = [&](int64_t e) {
    return round_up(static_cast<int64_t>(cnt[static_cast<size_t>(e)]), kGroupRows);
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return padded(a) < padded(b); });
  const int64_t n = static_cast<int64_t>(order.size());
  std::vector<int64_t> poff(static_cast<size_t>(E), -1);
  std::vector<void*> host(static_cast<size_t>(6 * n));  // [6][n] device addresses
  int64_t row = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t e = order[static_cast<size_t>(i)];
    poff[static_cast<size_t>(e)] = row;
    const int64_t o = off[static_cast<size_t>(e)];
    host[static_cast<size_t>(0 * n + i)] = const_cast<uint16_t*>(xs + o * D);          // x rows
    host[static_cast<size_t>(1 * n + i)] = const_cast<uint16_t*>(gu + e * 2 * I * D);  // gate_up
    host[static_cast<size_t>(2 * n + i)] = g + row * 2 * I;                            // g rows
    host[static_cast<size_t>(3 * n + i)] = h + row * I;                                // h rows
    host[static_cast<size_t>(4 * n + i)] = const_cast<uint16_t*>(dn + e * D * I);      // down
    host[static_cast<size_t>(5 * n + i)] = y + row * D;                                // y rows
    row += padded(e);
  }
  std::vector<int32_t> pad_inv(inv_h.size());
  for (size_t p = 0; p < inv_h.size(); ++p) {
    const int32_t e = idx_h[p], r = inv_h[p];
    pad_inv[p] =
        r < 0 || e < 0
            ? -1
            : static_cast<int32_t>(poff[static_cast<size_t>(e)] + r - off[static_cast<size_t>(e)]);
  }
  TD_CUDA_CHECK(cudaMemcpyAsync(ptrs, host.data(), host.size() * sizeof(void*),
                                cudaMemcpyHostToDevice, stream_));
  TD_CUDA_CHECK(cudaMemcpyAsync(inv_pad, pad_inv.data(), pad_inv.size() * 4, cudaMemcpyHostToDevice,
                                stream_));
  // The groups: runs of equal padded row count in `order`.
  std::vector<std::pair<int64_t, int64_t>> groups;  // (first index, count)
  for (int64_t i = 0; i < n;) {
    int64_t j = i;
    while (j < n && padded(order[static_cast<size_t>(j)]) == padded(order[static_cast<size_t>(i)]))
      ++j;
    groups.push_back({i, j - i});
    i = j;
  }
  const auto at = [&](int k, int64_t i) { return ptrs + k * n + i; };
  // A group cuBLASLt has no batched algorithm for runs expert by expert (exact row counts;
  // cuBLASLt, else the skinny kernel), into the same padded rows.
  const auto one_by_one = [&](int64_t i, int64_t c, bool up) {
    for (int64_t j = i; j < i + c; ++j) {
      const int64_t e = order[static_cast<size_t>(j)], m = cnt[static_cast<size_t>(e)];
      const int64_t r = poff[static_cast<size_t>(e)], o = off[static_cast<size_t>(e)];
      if (up && !lt_->gemm(xs + o * D, D, gu + e * 2 * I * D, D, g + r * 2 * I, 2 * I, false, m,
                           2 * I, D, stream_)) {
        Tensor ge = Tensor::wrap(g + r * 2 * I, {m, 2 * I}, DType::BF16, Device::cuda());
        Tensor we = Tensor::wrap(const_cast<uint16_t*>(gu + e * 2 * I * D), {2 * I, D}, DType::BF16,
                                 Device::cuda());
        skinny(xs + o * D, D, 0, we, 0, ge, 2 * I, 0, m, 2 * I, D, 1);
      }
      if (!up &&
          !lt_->gemm(h + r * I, I, dn + e * D * I, I, y + r * D, D, true, m, D, I, stream_)) {
        Tensor ye = Tensor::wrap(y + r * D, {m, D}, DType::F32, Device::cuda());
        Tensor we = Tensor::wrap(const_cast<uint16_t*>(dn + e * D * I), {D, I}, DType::BF16,
                                 Device::cuda());
        skinny(h + r * I, I, 0, we, 0, ye, D, 0, m, D, I, 1);
      }
    }
  };
  for (const auto& [i, c] : groups) {
    const int64_t m = padded(order[static_cast<size_t>(i)]);
    if (!lt_->gemm_ptr_array(at(0, i), D, at(1, i), D, at(2, i), 2 * I, false, m, 2 * I, D, c,
                             stream_))
      one_by_one(i, c, true);
  }
  for (int64_t r0 = 0; r0 < row; r0 += 65535)  // silu_mul's grid holds 65535 rows
    k::silu_mul(g + r0 * 2 * I, 2 * I, h + r0 * I, std::min<int64_t>(65535, row - r0), I, DT::BF16,
                stream_);
  TD_CUDA_LAUNCH_CHECK();
  for (const auto& [i, c] : groups) {
    const int64_t m = padded(order[static_cast<size_t>(i)]);
    if (!lt_->gemm_ptr_array(at(3, i), I, at(4, i), I, at(5, i), D, true, m, D, I, c, stream_))
      one_by_one(i, c, false);
  }
  return true;
}

void CudaBackend::moe_chunk(const Tensor& x, const Tensor& gate_up, const Tensor& down,
                            const Tensor& idx, const Tensor& weights, Tensor& out, bool host_path,
                            bool wgmma) {
  const int64_t T = x.size(0), D = x.size(1), E = gate_up.size(0), I = down.size(2),
                kk = idx.size(1);
  const int64_t P = T * kk;
  // The host path's grouped GEMMs pad each expert's rows to a multiple of kGroupRows in g, h and
  // y (R rows at most) and read up to kGroupRows - 1 rows past an expert's last row of xs.
  const int64_t R = host_path ? P + (kGroupRows - 1) * E : P;
  // Scratch: ints (counts E, offsets E+1, perm P, inv P, active E, num_active 1; on the host
  // path also the padded inv P and six pointer arrays of E; on the wgmma path num_tiles 1, a
  // padding int and the tiles 2 max_tiles), then h [R, I] bf16, y [R, D] f32, on the host path
  // xs [P + kGroupRows, D] bf16 and g [R, 2I] bf16, on the wgmma path xs [P, D] bf16.
  const int64_t max_tiles = wgmma ? k::moe_wgmma_max_tiles(P, E) : 0;
  const int64_t extra_ints = host_path ? P + 1 + 12 * E : wgmma ? 2 + 2 * max_tiles : 0;
  const size_t ints = static_cast<size_t>(round_up(3 * E + 2 + 2 * P + extra_ints, 64));
  const size_t h_bytes = static_cast<size_t>(round_up(R * I * 2, 256));
  const size_t y_bytes = static_cast<size_t>(round_up(R * D * 4, 256));
  const size_t xs_bytes = host_path ? static_cast<size_t>(round_up((P + kGroupRows) * D * 2, 256))
                          : wgmma   ? static_cast<size_t>(round_up(P * D * 2, 256))
                                    : 0;
  const size_t g_bytes = host_path ? static_cast<size_t>(round_up(R * 2 * I * 2, 256)) : 0;
  auto* base = static_cast<char*>(scratch(ints * 4 + h_bytes + y_bytes + xs_bytes + g_bytes));
  auto* counts = reinterpret_cast<int32_t*>(base);
  int32_t* offsets = counts + E;
  int32_t* perm = offsets + E + 1;
  int32_t* inv = perm + P;
  int32_t* active = inv + P;
  int32_t* num_active = active + E;
  void* h = base + ints * 4;
  auto* y = reinterpret_cast<float*>(base + ints * 4 + h_bytes);
  void* xs = base + ints * 4 + h_bytes + y_bytes;
  void* g = base + ints * 4 + h_bytes + y_bytes + xs_bytes;

  // The wgmma path's tile list, and for few rows the gather into expert order, come from
  // moe_prepare's own block (two launches fewer; the same lists and rows).
  int32_t* num_tiles = num_active + 1;
  int32_t* tiles = num_tiles + 1 + (E % 2 == 0 ? 1 : 0);  // int2 entries: 8-byte aligned
  k::MoePrepareFused fused;
  const bool fused_gather =
      wgmma && moe_fused_prepare_ && k::moe_prepare_gathers(P, D, x.stride(0), x.raw(), xs);
  if (wgmma && moe_fused_prepare_) {
    fused.tile_rows = k::kMoeWgmmaTileRows;
    fused.tiles = reinterpret_cast<int2*>(tiles);
    fused.num_tiles = num_tiles;
  }
  if (fused_gather) {
    fused.x = x.raw(), fused.xs = x.stride(0), fused.k = kk, fused.D = D;
    fused.x_sorted = xs;
  }
  k::moe_prepare(idx.data<int32_t>(), P, E, counts, offsets, perm, inv, active, num_active, stream_,
                 fused);
  TD_CUDA_LAUNCH_CHECK();
  if (wgmma) {
    // The routed rows in expert order (offsets[E] of them: under expert parallelism fewer than P).
    if (!fused_gather) {
      k::moe_gather_x(x.raw(), x.stride(0), kk, perm, P, D, xs, stream_, offsets + E);
      TD_CUDA_LAUNCH_CHECK();
    }
    k::moe_experts_wgmma(gate_up.raw(), down.raw(), counts, offsets, P, E, I, D, xs, tiles,
                         num_tiles, h, y, stream_, fused.tile_rows > 0);
    TD_CUDA_LAUNCH_CHECK();
  } else if (!host_path) {
    const int64_t max_active = std::min(E, P);
    if (k::moe_mma_applies(I, D) && moe_tensor_cores(P, E)) {
      const int groups = heuristics::moe_row_groups(moe_row_groups_, P, E);
      k::moe_gate_up_mma(x.raw(), x.stride(0), kk, gate_up.raw(), counts, offsets, perm, active,
                         num_active, max_active, I, D, h, groups, stream_);
      TD_CUDA_LAUNCH_CHECK();
      k::moe_down_mma(h, down.raw(), counts, offsets, active, num_active, max_active, I, D, y,
                      groups, stream_);
    } else {
      k::moe_gate_up(x.raw(), x.stride(0), kk, gate_up.raw(), counts, offsets, perm, active,
                     num_active, max_active, I, D, h, stream_);
      TD_CUDA_LAUNCH_CHECK();
      k::moe_down(h, down.raw(), counts, offsets, active, num_active, max_active, I, D, y, stream_);
    }
    TD_CUDA_LAUNCH_CHECK();
  } else {
    std::vector<int32_t> cnt(static_cast<size_t>(E)), off(static_cast<size_t>(E));
    std::vector<int32_t> inv_h, idx_h;  // the grouped path remaps inv on the host
    if (moe_grouped_) {
      inv_h.resize(static_cast<size_t>(P));
      idx_h.resize(static_cast<size_t>(P));
      TD_CUDA_CHECK(cudaMemcpyAsync(inv_h.data(), inv, P * 4, cudaMemcpyDeviceToHost, stream_));
      TD_CUDA_CHECK(cudaMemcpyAsync(idx_h.data(), idx.data<int32_t>(), P * 4,
                                    cudaMemcpyDeviceToHost, stream_));
    }
    TD_CUDA_CHECK(cudaMemcpyAsync(cnt.data(), counts, E * 4, cudaMemcpyDeviceToHost, stream_));
    TD_CUDA_CHECK(cudaMemcpyAsync(off.data(), offsets, E * 4, cudaMemcpyDeviceToHost, stream_));
    TD_CUDA_CHECK(cudaStreamSynchronize(stream_));
    // Rows routed to this rank's experts: under expert parallelism the other pairs (id -1) have
    // no row in perm.
    int64_t valid = 0;
    for (int32_t c : cnt) valid += c;
    if (valid > 0) k::moe_gather_x(x.raw(), x.stride(0), kk, perm, valid, D, xs, stream_);
    TD_CUDA_LAUNCH_CHECK();
    const auto* gu = static_cast<const uint16_t*>(gate_up.raw());
    const auto* dn = static_cast<const uint16_t*>(down.raw());
    auto* xs16 = static_cast<uint16_t*>(xs);
    auto* g16 = static_cast<uint16_t*>(g);
    auto* h16 = static_cast<uint16_t*>(h);
    if (moe_grouped_) {
      int32_t* inv_pad = active + E + 1;                                               // [P]
      auto* ptrs = reinterpret_cast<void**>(counts + round_up(3 * E + 2 + 3 * P, 2));  // [6][E]
      if (moe_host_grouped(cnt, off, inv_h, idx_h, xs16, gu, dn, g16, h16, y, inv_pad, ptrs, D,
                           I)) {
        k::moe_combine(y, DT::F32, inv_pad, weights.data<float>(), T, kk, D, out.raw(), stream_);
        TD_CUDA_LAUNCH_CHECK();
        return;
      }
    }
    // A GEMM per expert (TANDEM_MOE_GROUPED=0). One expert's GEMMs are small at prefill sizes (a
    // 4,096-token GLM-5.2 step gives each of the 256 experts ~128 rows: 32-64 output tiles of [128,
    // 4096] for 132 SMs), so one after another they leave most of the GPU idle. They run up to four
    // at a time instead: each expert's gate_up GEMM, silu_mul and down GEMM in order on one stream,
    // the experts dealt to the stream with the fewest rows so far, each stream with its own
    // cuBLASLt workspace. Experts write disjoint rows of g, h and y; moe_combine waits for every
    // stream.
    create_expert_streams();
    TD_CUDA_CHECK(cudaEventRecord(expert_fork_, stream_));
    for (cudaStream_t es : expert_streams_) TD_CUDA_CHECK(cudaStreamWaitEvent(es, expert_fork_, 0));
    const int slot = lt_->workspace();
    int64_t load[kExpertStreams] = {};
    std::vector<int64_t> fallback;  // experts cuBLASLt has no algorithm for: the skinny kernel
    for (int64_t e = 0; e < E; ++e) {
      const int64_t n = cnt[static_cast<size_t>(e)], o = off[static_cast<size_t>(e)];
      if (n == 0) continue;
      const int s = static_cast<int>(std::min_element(load, load + expert_streams_used_) - load);
      load[s] += n;
      cudaStream_t es = expert_streams_[s];
      lt_->use_workspace(2 + s);
      bool ok = lt_->gemm(xs16 + o * D, D, gu + e * 2 * I * D, D, g16 + o * 2 * I, 2 * I, false, n,
                          2 * I, D, es);
      if (ok) {
        k::silu_mul(g16 + o * 2 * I, 2 * I, h16 + o * I, n, I, DT::BF16, es);
        TD_CUDA_LAUNCH_CHECK();
        ok = lt_->gemm(h16 + o * I, I, dn + e * D * I, I, y + o * D, D, true, n, D, I, es);
      }
      if (!ok) fallback.push_back(e);
    }
    lt_->use_workspace(slot);
    for (int s = 0; s < kExpertStreams; ++s) {
      TD_CUDA_CHECK(cudaEventRecord(expert_events_[s], expert_streams_[s]));
      TD_CUDA_CHECK(cudaStreamWaitEvent(stream_, expert_events_[s], 0));
    }
    for (int64_t e : fallback) {  // whole experts again, on this stream
      const int64_t n = cnt[static_cast<size_t>(e)], o = off[static_cast<size_t>(e)];
      Tensor ge = Tensor::wrap(g16 + o * 2 * I, {n, 2 * I}, DType::BF16, Device::cuda());
      skinny(xs16 + o * D, D, 0, gate_up.select(0, e), 0, ge, 2 * I, 0, n, 2 * I, D, 1);
      k::silu_mul(g16 + o * 2 * I, 2 * I, h16 + o * I, n, I, DT::BF16, stream_);
      TD_CUDA_LAUNCH_CHECK();
      Tensor ye = Tensor::wrap(y + o * D, {n, D}, DType::F32, Device::cuda());
      skinny(h16 + o * I, I, 0, down.select(0, e), 0, ye, D, 0, n, D, I, 1);
    }
  }
  k::moe_combine(y, DT::F32, inv, weights.data<float>(), T, kk, D, out.raw(), stream_);
  TD_CUDA_LAUNCH_CHECK();
}

}  // namespace tandem::cuda
