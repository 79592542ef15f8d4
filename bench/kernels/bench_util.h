// What the GPU benchmarks share: the machine's ceilings measured in the same run, timing
// helpers, and the tables that stand on their own (linear paths, sampling).
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <string>
#include <vector>

#include "core/error.h"

#define CK(x) \
  TD_CHECK((x) == cudaSuccess, "CUDA call failed: {}", cudaGetErrorString(cudaGetLastError()))

namespace tandem::bench {

double median(std::vector<double> v);
// HBM copy bandwidth, bytes read + written (GB/s), and the bf16 cuBLASLt GEMM rate at 8192^3
// (TFLOP/s).
double measure_copy_gbps();
double measure_gemm_tflops();
// One GLM-5.2 projection at M rows through each GEMM path (linear_bench.cpp).
void bench_linear_paths(double copy_gbps, double gemm_tf, bool quick);
void bench_linear_f32(double copy_gbps, bool quick);
// Quantized weights (FP8 block, MXFP4): decode linears and MoE experts at batch 1 / 8 / 32 and
// FP8 prefill against per-tensor FP8 (quant_bench.cpp).
void bench_quant(double copy_gbps, bool quick);
// Sampling over the GLM-5 vocabulary (sampling_bench.cpp).
void bench_sampling(double copy_gbps, bool quick);
// Decode attention over a bf16 and an FP8 KV cache at 8k and 32k context
// (attention_fp8_bench.cpp).
void bench_mla_decode_fp8(double copy_gbps, bool quick);
// The indexer's top-2048 selection alone at 8k, 32k and 128k context (topk_bench.cpp).
void bench_topk_select(double copy_gbps, bool quick);
// CUB's radix sort of `rows` score rows of `len` keys (descending, with positions), microseconds
// per call over `launches` calls back to back: the selection's baseline (topk_baseline.cu).
double cub_sort_rows_us(const float* scores, int64_t rows, int64_t len, int launches,
                        cudaStream_t stream);
// Runs `run` with CUPTI recording every kernel it launches and prints them in start order (start,
// end, stream, grid, registers, name) with each stream's busy time (kernel_timeline.cpp).
void print_kernel_timeline(const std::function<void()>& run, const std::string& title);

// One kernel CUPTI saw: GPU clock start and end (ns), stream, grid, registers, short name.
struct KernelRecord {
  uint64_t start = 0, end = 0;
  uint32_t stream = 0;
  int64_t blocks = 0;
  int threads = 0, regs = 0;
  std::string name;
};
// Every kernel `run` launches (graph nodes included), in start order; false (and `run` still
// run) where the build has no CUPTI or CUPTI refused, with the reason printed.
bool record_kernels(const std::function<void()>& run, std::vector<KernelRecord>& out);

}  // namespace tandem::bench
