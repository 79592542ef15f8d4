// Launch shapes shared by the one-pass kernels (elementwise.cu, norm.cu, rope.cu, rows.cu,
// fill.cu, moe.cu's gather and combine): threads per block of the grid-stride kernels, their
// grid, the threads of a one-block-per-row kernel, and the check for their 16-byte forms.
#pragma once

#include <cstdint>

namespace tandem::cuda::k {

constexpr int kEwThreads = 256;

// Blocks of kEwThreads for n elements (at least 1, at most 65535 * 16; the loops stride).
inline unsigned grid_for(int64_t n) {
  const int64_t g = (n + kEwThreads - 1) / kEwThreads;
  return static_cast<unsigned>(g < 1 ? 1 : (g > 65535 * 16 ? 65535 * 16 : g));
}

// Whether p allows 16-byte vector accesses (the vector forms of the one-pass kernels).
inline bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// Threads of a one-block-per-row kernel over rows of D elements.
inline unsigned row_threads(int64_t D) {
  return D >= 1024 ? 512 : D >= 256 ? 256 : 128;
}

}  // namespace tandem::cuda::k
