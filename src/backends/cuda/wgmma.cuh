// Hopper warpgroup MMA (wgmma) building blocks, written against the PTX ISA ("Asynchronous
// Warpgroup Level Matrix Multiply-Accumulate Instructions"); sm_90a only. A warpgroup (4 warps,
// 128 threads) multiplies a 64-row A by a B of N columns: A from registers or shared memory, B
// from shared memory through a 64-bit descriptor, the product accumulated in registers
// asynchronously (fence before, commit and wait after).
//
// Shared-memory operands here use the 128-byte swizzle: a tile is made of 1024-byte atoms of
// 8 rows x 128 bytes (64 bf16), and the 16-byte piece p of row r of an atom sits at piece
// position p ^ (r % 8). Atoms must be 1024-byte aligned. One layout serves both uses of a key
// tile in attention: K-major (rows = keys, the dims contiguous) for Q K^T, and N-major (rows =
// keys as the K dimension, the value columns contiguous) for P V.
#pragma once

#include <cstdint>

#include "backends/cuda/common.cuh"

namespace tandem::cuda::k {

// Byte offset of 16-byte piece `piece` of row `row` in a swizzled tile of `rows` rows whose
// 128-byte column atoms follow each other (atom a = pieces [8a, 8a + 8) of every row).
__host__ __device__ constexpr uint32_t sw128_offset(int rows, int row, int piece) {
  return static_cast<uint32_t>((piece >> 3) * rows * 128 + row * 128 +
                               (((piece & 7) ^ (row & 7)) << 4));
}

// Matrix descriptor: start address, leading and stride byte offsets (each >> 4, 14 bits), base
// offset 0 (atoms 1024-byte aligned), swizzle mode 1 = 128 bytes (bits 62-63). K-major tiles:
// lbo unused (1), sbo = 1024 (the next 8 rows). N-major tiles: lbo = the next 64 columns' atom,
// sbo = the next 8 rows (of K).
__device__ __forceinline__ uint64_t wgmma_desc(const void* smem, uint32_t lbo, uint32_t sbo) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  return static_cast<uint64_t>((a & 0x3FFFFu) >> 4) | (static_cast<uint64_t>(lbo >> 4) << 16) |
         (static_cast<uint64_t>(sbo >> 4) << 32) | (1ull << 62);
}

// An N-major tile of COLS columns (64, 32 or 16 bf16: rows of 128, 64 or 32 bytes) in the swizzle
// of its row width (modes 1, 2, 3 = 128, 64, 32 bytes): 16-byte piece p of row r sits at piece
// position p ^ (r % 8) for 128-byte rows, p ^ ((r / 2) % 4) for 64-byte rows and p ^ ((r / 4) % 2)
// for 32-byte rows (the XOR of address bits 4.. with bits 7..); atoms of 8 rows (1024, 512 or 256
// bytes) aligned to their size. sbo = the next 8 rows (of K); lbo names the next atom column,
// which a tile one atom wide does not have (given as the tile's bytes, as for wgmma_desc).
template <int COLS>
__host__ __device__ constexpr uint32_t nmajor_piece(int row, int piece) {
  static_assert(COLS == 64 || COLS == 32 || COLS == 16);
  if constexpr (COLS == 64) return static_cast<uint32_t>(piece ^ (row & 7));
  if constexpr (COLS == 32) return static_cast<uint32_t>(piece ^ ((row >> 1) & 3));
  return static_cast<uint32_t>(piece ^ ((row >> 2) & 1));
}
template <int COLS>
__device__ __forceinline__ uint64_t wgmma_desc_nmajor(const void* smem, uint32_t tile_bytes) {
  static_assert(COLS == 64 || COLS == 32 || COLS == 16);
  constexpr uint64_t mode = COLS == 64 ? 1 : COLS == 32 ? 2 : 3;
  constexpr uint32_t sbo = 8 * COLS * 2;
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  return static_cast<uint64_t>((a & 0x3FFFFu) >> 4) |
         (static_cast<uint64_t>(tile_bytes >> 4) << 16) | (static_cast<uint64_t>(sbo >> 4) << 32) |
         (mode << 62);
}

// Orders this thread's register writes before the warpgroup's next wgmma reads them (and its
// accumulator reads after a wait): required before the first wgmma of a batch.
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Returns once at most N of the warpgroup's committed wgmma groups are still running.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Ties the registers of an accumulator to this point of the program: the compiler sees them
// read and written here, so it cannot move their use across a wgmma_wait (which names no
// register) while an asynchronous wgmma may still write them.
template <int N>
__device__ __forceinline__ void wgmma_fence_operands(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
__device__ __forceinline__ void wgmma_fence_operands(uint32_t (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}
// Makes this thread's generic-proxy writes to shared memory (stores, cp.async) visible to the
// async proxy that wgmma reads through; then a barrier publishes them to the warpgroup.
__device__ __forceinline__ void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// K-step s (16 bf16 dims) of a K-major 64-row swizzled tile as a descriptor offset in 16-byte
// units (for wgmma_desc_add): atom s / 4, byte 32 (s % 4) of its 128-byte rows.
constexpr uint32_t kmajor64_kstep(int s) {
  return static_cast<uint32_t>(((s >> 2) * 64 * 128 + (s & 3) * 32) >> 4);
}

// A descriptor moved by off16 16-byte units (a k-step, a row group): a 32-bit add on the address
// field, which cannot carry out of it (shared memory ends below 2^18 bytes).
__device__ __forceinline__ uint64_t wgmma_desc_add(uint64_t d, uint32_t off16) {
  uint32_t lo, hi;
  asm("mov.b64 {%0, %1}, %2;" : "=r"(lo), "=r"(hi) : "l"(d));
  uint64_t r;
  asm("mov.b64 %0, {%1, %2};" : "=l"(r) : "r"(lo + off16), "r"(hi));
  return r;
}

// The asm operand lists of the wrappers below: an accumulator of N / 2 floats as "+f" operands
// (d[o] .. d[o + 31] for TD_WGMMA_ACC32), and the register lists that name them in the
// instruction text.
#define TD_WGMMA_ACC8(d, o)                                                             \
  "+f"((d)[o]), "+f"((d)[o + 1]), "+f"((d)[o + 2]), "+f"((d)[o + 3]), "+f"((d)[o + 4]), \
      "+f"((d)[o + 5]), "+f"((d)[o + 6]), "+f"((d)[o + 7])
#define TD_WGMMA_ACC32(d, o) \
  TD_WGMMA_ACC8(d, o), TD_WGMMA_ACC8(d, o + 8), TD_WGMMA_ACC8(d, o + 16), TD_WGMMA_ACC8(d, o + 24)
#define TD_WGMMA_ACC64(d) TD_WGMMA_ACC32(d, 0), TD_WGMMA_ACC32(d, 32)
#define TD_WGMMA_ACC128(d) TD_WGMMA_ACC64(d), TD_WGMMA_ACC32(d, 64), TD_WGMMA_ACC32(d, 96)
#define TD_WGMMA_R32                                                                               \
  "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25," \
  "%26,%27,%28,%29,%30,%31"
#define TD_WGMMA_R64                                                                           \
  TD_WGMMA_R32                                                                                 \
  ",%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%" \
  "54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
#define TD_WGMMA_R128                                                                          \
  TD_WGMMA_R64                                                                                 \
  ",%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%" \
  "86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106," \
  "%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124," \
  "%125,%126,%127"

// Register lists of 8 .. 120 operands for the N = 16 .. 240 wgmmas (R32, R64, R128 above).
#define TD_WGMMA_R8 "%0,%1,%2,%3,%4,%5,%6,%7"
#define TD_WGMMA_R16 TD_WGMMA_R8 ",%8,%9,%10,%11,%12,%13,%14,%15"
#define TD_WGMMA_R24 TD_WGMMA_R16 ",%16,%17,%18,%19,%20,%21,%22,%23"
#define TD_WGMMA_R40 TD_WGMMA_R32 ",%32,%33,%34,%35,%36,%37,%38,%39"
#define TD_WGMMA_R48 TD_WGMMA_R40 ",%40,%41,%42,%43,%44,%45,%46,%47"
#define TD_WGMMA_R56 TD_WGMMA_R48 ",%48,%49,%50,%51,%52,%53,%54,%55"
#define TD_WGMMA_R72 TD_WGMMA_R64 ",%64,%65,%66,%67,%68,%69,%70,%71"
#define TD_WGMMA_R80 TD_WGMMA_R72 ",%72,%73,%74,%75,%76,%77,%78,%79"
#define TD_WGMMA_R88 TD_WGMMA_R80 ",%80,%81,%82,%83,%84,%85,%86,%87"
#define TD_WGMMA_R96 TD_WGMMA_R88 ",%88,%89,%90,%91,%92,%93,%94,%95"
#define TD_WGMMA_R104 TD_WGMMA_R96 ",%96,%97,%98,%99,%100,%101,%102,%103"
#define TD_WGMMA_R112 TD_WGMMA_R104 ",%104,%105,%106,%107,%108,%109,%110,%111"
#define TD_WGMMA_R120 TD_WGMMA_R112 ",%112,%113,%114,%115,%116,%117,%118,%119"

// d[64 x 256] (+)= A[64 x 16] (registers: this thread's m16k16 fragment of its warp's 16 rows) .
// B[16 x 256] (shared memory, N-major: transposed on the fly); accumulate = 0 overwrites d.
__device__ __forceinline__ void wgmma_m64n256k16_rs_tn(float (&d)[128], const uint32_t (&a)[4],
                                                       uint64_t db, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {" TD_WGMMA_R128
      "}, "
      "{%128,%129,%130,%131}, %132, p, 1, 1, 1;\n}\n"
      : TD_WGMMA_ACC128(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(accumulate));
}

// The same at N = 64 and 128 (a block that owns fewer value columns: the MLA decode's column
// parts); one output element's arithmetic does not depend on N.
__device__ __forceinline__ void wgmma_m64n64k16_rs_tn(float (&d)[32], const uint32_t (&a)[4],
                                                      uint64_t db, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" TD_WGMMA_R32
      "}, "
      "{%32,%33,%34,%35}, %36, p, 1, 1, 1;\n}\n"
      : TD_WGMMA_ACC32(d, 0)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(accumulate));
}

__device__ __forceinline__ void wgmma_m64n128k16_rs_tn(float (&d)[64], const uint32_t (&a)[4],
                                                       uint64_t db, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" TD_WGMMA_R64
      "}, "
      "{%64,%65,%66,%67}, %68, p, 1, 1, 1;\n}\n"
      : TD_WGMMA_ACC64(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(accumulate));
}

// d[64 x N] (+)= A . B for N = 64, 128, 256: the instruction of that width.
template <int N>
__device__ __forceinline__ void wgmma_rs_tn(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t db,
                                            int accumulate) {
  if constexpr (N == 256)
    wgmma_m64n256k16_rs_tn(d, a, db, accumulate);
  else if constexpr (N == 128)
    wgmma_m64n128k16_rs_tn(d, a, db, accumulate);
  else
    wgmma_m64n64k16_rs_tn(d, a, db, accumulate);
}

// Both operands K-major in shared memory: one instruction `m64n<n><kt>` (kt: the k-step and the
// types, e.g. "k16.f32.bf16.bf16") whose text ends in `tail` (the scale and, for 16-bit types,
// the transpose immediates), accumulating into the listed registers unless accumulate is 0.
#define TD_WGMMA_SS_K(kt, tail, n, list, ia, ib, ip, ...)                                          \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #ip                                            \
               ", 0;\n"                                                                            \
               "wgmma.mma_async.sync.aligned.m64n" #n kt " {" list "}, %" #ia ", %" #ib ", p" tail \
               ";\n}\n"                                                                            \
               : __VA_ARGS__                                                                       \
               : "l"(da), "l"(db), "r"(accumulate))
// The instruction of width N = 16, 32, .., 128 (an if-constexpr chain a caller may continue).
#define TD_WGMMA_SS_UPTO128(kt, tail)                                                \
  if constexpr (N == 16)                                                             \
    TD_WGMMA_SS_K(kt, tail, 16, TD_WGMMA_R8, 8, 9, 10, TD_WGMMA_ACC8(d, 0));         \
  else if constexpr (N == 32)                                                        \
    TD_WGMMA_SS_K(kt, tail, 32, TD_WGMMA_R16, 16, 17, 18, TD_WGMMA_ACC8(d, 0),       \
                  TD_WGMMA_ACC8(d, 8));                                              \
  else if constexpr (N == 48)                                                        \
    TD_WGMMA_SS_K(kt, tail, 48, TD_WGMMA_R24, 24, 25, 26, TD_WGMMA_ACC8(d, 0),       \
                  TD_WGMMA_ACC8(d, 8), TD_WGMMA_ACC8(d, 16));                        \
  else if constexpr (N == 64)                                                        \
    TD_WGMMA_SS_K(kt, tail, 64, TD_WGMMA_R32, 32, 33, 34, TD_WGMMA_ACC32(d, 0));     \
  else if constexpr (N == 80)                                                        \
    TD_WGMMA_SS_K(kt, tail, 80, TD_WGMMA_R40, 40, 41, 42, TD_WGMMA_ACC32(d, 0),      \
                  TD_WGMMA_ACC8(d, 32));                                             \
  else if constexpr (N == 96)                                                        \
    TD_WGMMA_SS_K(kt, tail, 96, TD_WGMMA_R48, 48, 49, 50, TD_WGMMA_ACC32(d, 0),      \
                  TD_WGMMA_ACC8(d, 32), TD_WGMMA_ACC8(d, 40));                       \
  else if constexpr (N == 112)                                                       \
    TD_WGMMA_SS_K(kt, tail, 112, TD_WGMMA_R56, 56, 57, 58, TD_WGMMA_ACC32(d, 0),     \
                  TD_WGMMA_ACC8(d, 32), TD_WGMMA_ACC8(d, 40), TD_WGMMA_ACC8(d, 48)); \
  else if constexpr (N == 128)                                                       \
    TD_WGMMA_SS_K(kt, tail, 128, TD_WGMMA_R64, 64, 65, 66, TD_WGMMA_ACC64(d));
#define TD_BF16_KT "k16.f32.bf16.bf16"
#define TD_BF16_TAIL ", 1, 1, 0, 0"
#define TD_BF16_TAIL_TN ", 1, 1, 0, 1"  // B N-major (transposed on the fly)

// d[64 x N] (+)= A[64 x 16] . B[N x 16]^T, both K-major in shared memory, N = 16, 32, .., 256:
// Q K^T over a 64-key tile (N = 64), and a weight tile as A against a token tile of N rows as B
// (the grouped expert GEMM, where N follows an expert's row count). One output element's
// arithmetic does not depend on N.
template <int N>
__device__ __forceinline__ void wgmma_ss_kk(float (&d)[N / 2], uint64_t da, uint64_t db,
                                            int accumulate) {
  static_assert(N % 16 == 0 && N >= 16 && N <= 256, "N = 16, 32, .., 256");
  TD_WGMMA_SS_UPTO128(TD_BF16_KT, TD_BF16_TAIL)
  else if constexpr (N == 144) TD_WGMMA_SS_K(TD_BF16_KT, TD_BF16_TAIL, 144, TD_WGMMA_R72, 72, 73,
                                             74, TD_WGMMA_ACC64(d), TD_WGMMA_ACC8(d, 64));
  else if constexpr (N == 160)
      TD_WGMMA_SS_K(TD_BF16_KT, TD_BF16_TAIL, 160, TD_WGMMA_R80, 80, 81, 82, TD_WGMMA_ACC64(d),
                    TD_WGMMA_ACC8(d, 64), TD_WGMMA_ACC8(d, 72));
  else if constexpr (N == 176)
      TD_WGMMA_SS_K(TD_BF16_KT, TD_BF16_TAIL, 176, TD_WGMMA_R88, 88, 89, 90, TD_WGMMA_ACC64(d),
                    TD_WGMMA_ACC8(d, 64), TD_WGMMA_ACC8(d, 72), TD_WGMMA_ACC8(d, 80));
  else if constexpr (N == 192) TD_WGMMA_SS_K(TD_BF16_KT, TD_BF16_TAIL, 192, TD_WGMMA_R96, 96, 97,
                                             98, TD_WGMMA_ACC64(d), TD_WGMMA_ACC32(d, 64));
  else if constexpr (N == 208)
      TD_WGMMA_SS_K(TD_BF16_KT, TD_BF16_TAIL, 208, TD_WGMMA_R104, 104, 105, 106, TD_WGMMA_ACC64(d),
                    TD_WGMMA_ACC32(d, 64), TD_WGMMA_ACC8(d, 96));
  else if constexpr (N == 224)
      TD_WGMMA_SS_K(TD_BF16_KT, TD_BF16_TAIL, 224, TD_WGMMA_R112, 112, 113, 114, TD_WGMMA_ACC64(d),
                    TD_WGMMA_ACC32(d, 64), TD_WGMMA_ACC8(d, 96), TD_WGMMA_ACC8(d, 104));
  else if constexpr (N == 240) TD_WGMMA_SS_K(
      TD_BF16_KT, TD_BF16_TAIL, 240, TD_WGMMA_R120, 120, 121, 122, TD_WGMMA_ACC64(d),
      TD_WGMMA_ACC32(d, 64), TD_WGMMA_ACC8(d, 96), TD_WGMMA_ACC8(d, 104), TD_WGMMA_ACC8(d, 112));
  else TD_WGMMA_SS_K(TD_BF16_KT, TD_BF16_TAIL, 256, TD_WGMMA_R128, 128, 129, 130, TD_WGMMA_ACC64(d),
                     TD_WGMMA_ACC32(d, 64), TD_WGMMA_ACC32(d, 96));
}

// d[64 x N] (+)= A[64 x 32] . B[N x 32]^T on e4m3 operands, both K-major in shared memory (the
// only layout 8-bit wgmma takes; a 32-element k-step is 32 bytes, as bf16's 16), N = 16, 32, ..,
// 128: a weight tile against a tile of FP8 token rows (moe_wgmma_fp8.cu). The products of one
// k-step are summed in the tensor core's own accumulator, so callers promote into a second
// accumulator every few k-steps, as the FP8 block scales require anyway.
template <int N>
__device__ __forceinline__ void wgmma_ss_e4m3(float (&d)[N / 2], uint64_t da, uint64_t db,
                                              int accumulate) {
  static_assert(N % 16 == 0 && N >= 16 && N <= 128, "N = 16, 32, .., 128");
  TD_WGMMA_SS_UPTO128("k32.f32.e4m3.e4m3", ", 1, 1")
}
// d[64 x 64] = A[64 x 16 KS] . B[64 x 16 KS]^T over KS k-steps of two K-major 64-row swizzled
// tiles, waited for: Q K^T of one 64-key block over MLA's 576 dims (KS = 36). The one-block
// mla_decode kernel and the chain's scores kernel both call it, so that their scores are the
// same instructions, and the same bits.
template <int KS>
__device__ __forceinline__ void wgmma_kmajor64_product(float (&d)[32], uint64_t da, uint64_t db) {
  wgmma_fence();
#pragma unroll
  for (int s = 0; s < KS; ++s)
    wgmma_ss_kk<64>(d, wgmma_desc_add(da, kmajor64_kstep(s)), wgmma_desc_add(db, kmajor64_kstep(s)),
                    s > 0);
  wgmma_commit();
  wgmma_wait<0>();
  wgmma_fence_operands(d);
}

// d[64 x N] (+)= A[64 x 16] (shared memory, K-major) . B[16 x N] (shared memory, N-major:
// transposed on the fly), N = 16, 32, 64, 128, 256: P V with P from a shared tile.
__device__ __forceinline__ void wgmma_m64n64k16_ss_tn(float (&d)[32], uint64_t da, uint64_t db,
                                                      int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" TD_WGMMA_R32
      "}, "
      "%32, %33, p, 1, 1, 0, 1;\n}\n"
      : TD_WGMMA_ACC32(d, 0)
      : "l"(da), "l"(db), "r"(accumulate));
}

__device__ __forceinline__ void wgmma_m64n128k16_ss_tn(float (&d)[64], uint64_t da, uint64_t db,
                                                       int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" TD_WGMMA_R64
      "}, "
      "%64, %65, p, 1, 1, 0, 1;\n}\n"
      : TD_WGMMA_ACC64(d)
      : "l"(da), "l"(db), "r"(accumulate));
}

__device__ __forceinline__ void wgmma_m64n256k16_ss_tn(float (&d)[128], uint64_t da, uint64_t db,
                                                       int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {" TD_WGMMA_R128
      "}, "
      "%128, %129, p, 1, 1, 0, 1;\n}\n"
      : TD_WGMMA_ACC128(d)
      : "l"(da), "l"(db), "r"(accumulate));
}

template <int N>
__device__ __forceinline__ void wgmma_ss_tn(float (&d)[N / 2], uint64_t da, uint64_t db,
                                            int accumulate) {
  if constexpr (N == 256)
    wgmma_m64n256k16_ss_tn(d, da, db, accumulate);
  else if constexpr (N == 128)
    wgmma_m64n128k16_ss_tn(d, da, db, accumulate);
  else if constexpr (N == 64)
    wgmma_m64n64k16_ss_tn(d, da, db, accumulate);
  else if constexpr (N == 32)
    TD_WGMMA_SS_K(TD_BF16_KT, TD_BF16_TAIL_TN, 32, TD_WGMMA_R16, 16, 17, 18, TD_WGMMA_ACC8(d, 0),
                  TD_WGMMA_ACC8(d, 8));
  else
    TD_WGMMA_SS_K(TD_BF16_KT, TD_BF16_TAIL_TN, 16, TD_WGMMA_R8, 8, 9, 10, TD_WGMMA_ACC8(d, 0));
}

#undef TD_WGMMA_SS_K
#undef TD_WGMMA_SS_UPTO128
#undef TD_BF16_KT
#undef TD_BF16_TAIL
#undef TD_BF16_TAIL_TN

#undef TD_WGMMA_ACC8
#undef TD_WGMMA_ACC32
#undef TD_WGMMA_ACC64
#undef TD_WGMMA_ACC128
#undef TD_WGMMA_R32
#undef TD_WGMMA_R64
#undef TD_WGMMA_R128
#undef TD_WGMMA_R8
#undef TD_WGMMA_R16
#undef TD_WGMMA_R24
#undef TD_WGMMA_R40
#undef TD_WGMMA_R48
#undef TD_WGMMA_R56
#undef TD_WGMMA_R72
#undef TD_WGMMA_R80
#undef TD_WGMMA_R88
#undef TD_WGMMA_R96
#undef TD_WGMMA_R104
#undef TD_WGMMA_R112
#undef TD_WGMMA_R120

}  // namespace tandem::cuda::k
