// The one-shot all-reduce kernel: see one_shot_kernel.h for the protocol and buffer layout.
#include <cuda_bf16.h>

#include "distributed/one_shot_kernel.h"

namespace tandem::oneshot {
namespace {

// Flags cross processes (and GPUs over NVLink), hence system scope. The writer publishes with a
// release store after the block's data stores; the reader acquires before the block reads.
__device__ __forceinline__ uint32_t load_acquire(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void store_release(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// a.bufs[r] for a run-time r, by constant indices only: indexing the kernel parameter with a
// variable would copy all of Args to local memory.
__device__ __forceinline__ char* buf_of(const Args& a, int r) {
  char* p = a.bufs[0];
#pragma unroll
  for (int i = 1; i < kMaxRanks; ++i)
    if (r == i) p = a.bufs[i];
  return p;
}

// 16 bytes of T, unpacked to floats for the sum and packed back.
template <typename T>
struct Pack;
template <>
struct Pack<float> {
  static constexpr int N = 4;
  __device__ static void unpack(const uint4& v, float* f) {
    f[0] = __uint_as_float(v.x), f[1] = __uint_as_float(v.y);
    f[2] = __uint_as_float(v.z), f[3] = __uint_as_float(v.w);
  }
  __device__ static float to_float(float v) { return v; }
  __device__ static float from_float(float v) { return v; }
};
template <>
struct Pack<__nv_bfloat16> {
  static constexpr int N = 8;
  __device__ static void unpack(const uint4& v, float* f) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      f[2 * i] = __uint_as_float(w[i] << 16);
      f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
  }
  __device__ static float to_float(__nv_bfloat16 v) {
    return __bfloat162float(v);
  }
  __device__ static __nv_bfloat16 from_float(float v) {
    return __float2bfloat16_rn(v);
  }
};

template <typename T>
__global__ void __launch_bounds__(kThreads) all_reduce(Args a) {
  constexpr int N = Pack<T>::N;
  const int b = blockIdx.x;
  char* mine = buf_of(a, a.rank);
  auto* epochs = reinterpret_cast<uint32_t*>(mine + kEpochsOffset);
  auto* my_flags = reinterpret_cast<uint32_t*>(mine + kFlagsOffset);
  __shared__ uint32_t epoch_s;
  __shared__ int failed_s;
  if (threadIdx.x == 0) {
    epoch_s = epochs[b] + 1;
    failed_s = 0;
  }
  __syncthreads();
  const uint32_t epoch = epoch_s;
  const size_t slot = kDataOffset + (epoch & 1) * a.slot_bytes;

  // This block's share: 16-byte vectors [v0, v1) of the ceil(n / N) that hold x. The buffers'
  // slots are 16-byte aligned and padded; x may be neither, then its edges go element-wise.
  T* x = static_cast<T*>(a.x);
  const int64_t nv = (a.n + N - 1) / N;
  const int64_t per = (nv + gridDim.x - 1) / gridDim.x;
  const int64_t v0 = min(nv, b * per), v1 = min(nv, v0 + per);
  const bool aligned = (reinterpret_cast<uintptr_t>(x) & 15) == 0;

  // 1. This rank's share into its peer-visible buffer.
  auto* mine_v = reinterpret_cast<uint4*>(mine + slot);
  for (int64_t v = v0 + threadIdx.x; v < v1; v += blockDim.x) {
    const int64_t e = v * N;
    if (aligned && e + N <= a.n) {
      mine_v[v] = *reinterpret_cast<const uint4*>(x + e);
    } else {
      T* dst = reinterpret_cast<T*>(mine_v + v);
      for (int k = 0; k < N && e + k < a.n; ++k) dst[k] = x[e + k];
    }
  }

  // 2. Meet block b of every rank: tell each rank this share is in place, wait for theirs.
  // A peer may already be one call ahead and have written epoch + 1, hence "at least epoch".
  __syncthreads();
  if (threadIdx.x < a.world) {
    const int r = threadIdx.x;
    __threadfence_system();  // the block's data stores (ordered by the barrier) before the flag
    store_release(reinterpret_cast<uint32_t*>(buf_of(a, r) + kFlagsOffset) + b * kMaxRanks + a.rank,
                  epoch);
    const uint32_t* flag = my_flags + b * kMaxRanks + r;
    const uint64_t deadline = now_ns() + a.timeout_ns;
    for (uint32_t spins = 1; static_cast<int32_t>(load_acquire(flag) - epoch) < 0; ++spins) {
      // A dead or stuck peer must not hang the GPU: give up on abort or after the timeout
      // (checked every 1024 polls; the abort flag is host memory, slow to read).
      if ((spins & 1023) == 0) {
        if (*a.abort) {
          *a.status = kAborted;
          failed_s = 1;
          break;
        }
        if (now_ns() > deadline) {
          *a.status = kTimedOut | r;
          failed_s = 1;
          break;
        }
      }
    }
  }
  __syncthreads();
  if (failed_s) return;  // x is left unfinished; the host side reports the failure
  if (threadIdx.x == 0) epochs[b] = epoch;

  // 3. The sum of every rank's share, in rank order, accumulated in f32.
  for (int64_t v = v0 + threadIdx.x; v < v1; v += blockDim.x) {
    uint4 in[kMaxRanks];
#pragma unroll
    for (int r = 0; r < kMaxRanks; ++r)
      if (r < a.world) in[r] = reinterpret_cast<const uint4*>(a.bufs[r] + slot)[v];
    float acc[N], f[N];
    Pack<T>::unpack(in[0], acc);
#pragma unroll
    for (int r = 1; r < kMaxRanks; ++r) {
      if (r < a.world) {
        Pack<T>::unpack(in[r], f);
#pragma unroll
        for (int k = 0; k < N; ++k) acc[k] += f[k];
      }
    }
    const int64_t e = v * N;
    if (aligned && e + N <= a.n) {
      alignas(16) T out[N];
#pragma unroll
      for (int k = 0; k < N; ++k) out[k] = Pack<T>::from_float(acc[k]);
      *reinterpret_cast<uint4*>(x + e) = *reinterpret_cast<const uint4*>(out);
    } else {
      for (int k = 0; k < N && e + k < a.n; ++k) x[e + k] = Pack<T>::from_float(acc[k]);
    }
  }
}

}  // namespace

cudaError_t launch(const Args& a, cudaStream_t stream) {
  if (a.dtype == DType::BF16)
    all_reduce<__nv_bfloat16><<<kBlocks, kThreads, 0, stream>>>(a);
  else
    all_reduce<float><<<kBlocks, kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace tandem::oneshot
