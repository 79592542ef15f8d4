// Device side of lt_algo_survey.cpp: random bf16 fill and an order-free hash per output row.
#include <cuda_bf16.h>

#include <cstdint>
#include <cstring>

namespace {

__device__ uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform values in [-1, 1) from a counter hash: never zeros, never a pattern a kernel could
// exploit.
template <class T>
__global__ void fill(T* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t h = mix64(seed * 0x100000001b3ull + i);
    p[i] = static_cast<T>(static_cast<float>(h >> 40) / 8388608.0f - 1.0f);
  }
}

// One hash per row of d [M, N] (bf16 or f32): the sum of mix(column, bits), order-free, so the
// block's reduction order cannot matter.
template <class T, class Bits>
__global__ void hash_rows(const T* d, int64_t N, uint64_t* out) {
  const int64_t row = blockIdx.x;
  uint64_t acc = 0;
  for (int64_t c = threadIdx.x; c < N; c += blockDim.x) {
    Bits bits;
    std::memcpy(&bits, &d[row * N + c], sizeof(Bits));
    acc += mix64((static_cast<uint64_t>(c) << 32) ^ bits);
  }
  __shared__ uint64_t part[256];
  part[threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    uint64_t s = 0;
    for (int i = 0; i < blockDim.x; ++i) s += part[i];
    out[row] = s;
  }
}

}  // namespace

void survey_fill(void* p, bool f32, size_t n, uint64_t seed) {
  if (f32)
    fill<<<1024, 256>>>(static_cast<float*>(p), n, seed);
  else
    fill<<<1024, 256>>>(static_cast<__nv_bfloat16*>(p), n, seed);
}
void survey_hash_rows(const void* d, bool f32, int64_t M, int64_t N, uint64_t* out) {
  if (f32)
    hash_rows<float, uint32_t>
        <<<static_cast<unsigned>(M), 256>>>(static_cast<const float*>(d), N, out);
  else
    hash_rows<__nv_bfloat16, uint16_t>
        <<<static_cast<unsigned>(M), 256>>>(static_cast<const __nv_bfloat16*>(d), N, out);
}
