// The baseline beside the indexer's selection in kernel_bench: what a top-K without a selection
// kernel does, sort each score row (CUB's radix sort, keys descending with their positions; a
// stable sort, so equal scores stay in position order and the first K are the same set the
// selection takes). Timed the way topk_bench times the selection: launches back to back.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_radix_sort.cuh>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace tandem::bench {

double median(std::vector<double> v);  // bench_util.h, which nvcc cannot include (fmt)

namespace {
// bench_util.h's CK formats with fmt, which nvcc's front end rejects in device-side files.
void check(cudaError_t e) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "topk baseline: CUDA call failed: %s\n", cudaGetErrorString(e));
  std::abort();
}
}  // namespace

double cub_sort_rows_us(const float* scores, int64_t rows, int64_t len, int launches,
                        cudaStream_t stream) {
  const int n = static_cast<int>(rows * len);
  float* keys_out = nullptr;
  int32_t *vals_in = nullptr, *vals_out = nullptr, *offsets = nullptr;
  check(cudaMalloc(&keys_out, sizeof(float) * n));
  check(cudaMalloc(&vals_in, sizeof(int32_t) * n));
  check(cudaMalloc(&vals_out, sizeof(int32_t) * n));
  check(cudaMalloc(&offsets, sizeof(int32_t) * (rows + 1)));
  std::vector<int32_t> pos(static_cast<size_t>(n)), off(static_cast<size_t>(rows + 1));
  for (int i = 0; i < n; ++i) pos[i] = static_cast<int32_t>(i % len);
  for (int64_t r = 0; r <= rows; ++r) off[r] = static_cast<int32_t>(r * len);
  check(cudaMemcpy(vals_in, pos.data(), sizeof(int32_t) * n, cudaMemcpyHostToDevice));
  check(cudaMemcpy(offsets, off.data(), sizeof(int32_t) * (rows + 1), cudaMemcpyHostToDevice));
  // One row: the device-wide sort; several: the segmented sort, a row per segment.
  auto sort = [&](void* tmp, size_t& bytes) {
    if (rows == 1)
      return cub::DeviceRadixSort::SortPairsDescending(tmp, bytes, scores, keys_out, vals_in,
                                                       vals_out, n, 0, 32, stream);
    return cub::DeviceSegmentedRadixSort::SortPairsDescending(tmp, bytes, scores, keys_out, vals_in,
                                                              vals_out, n, static_cast<int>(rows),
                                                              offsets, offsets + 1, 0, 32, stream);
  };
  size_t bytes = 0;
  check(sort(nullptr, bytes));
  void* tmp = nullptr;
  check(cudaMalloc(&tmp, bytes));
  check(sort(tmp, bytes));  // warm-up
  cudaEvent_t e0, e1;
  check(cudaEventCreate(&e0));
  check(cudaEventCreate(&e1));
  std::vector<double> us;
  for (int i = 0; i < 7; ++i) {
    check(cudaEventRecord(e0, stream));
    for (int l = 0; l < launches; ++l) check(sort(tmp, bytes));
    check(cudaEventRecord(e1, stream));
    check(cudaEventSynchronize(e1));
    float ms = 0;
    check(cudaEventElapsedTime(&ms, e0, e1));
    us.push_back(ms * 1e3 / launches);
  }
  check(cudaEventDestroy(e0));
  check(cudaEventDestroy(e1));
  for (void* p : {static_cast<void*>(keys_out), static_cast<void*>(vals_in),
                  static_cast<void*>(vals_out), static_cast<void*>(offsets), tmp})
    check(cudaFree(p));
  return median(us);
}

}  // namespace tandem::bench
