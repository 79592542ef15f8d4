// Element types and their conversions to and from fp32 (host side).
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace tandem {

enum class DType : uint8_t {
  F32,
  F16,
  BF16,
  F8_E4M3,  // OCP e4m3fn: no inf, 0x7f/0xff are NaN, max 448
  E8M0,     // power-of-two scale: value = 2^(byte - 127), 0xff is NaN
  FP4X2,    // two e2m1 codes per byte, element 2i in the low nibble
  U8,
  I32,
  I64,
};

// Bytes per stored element (FP4X2 stores a pair per element).
constexpr int64_t dtype_size(DType t) {
  switch (t) {
    case DType::F32:
      return 4;
    case DType::F16:
      return 2;
    case DType::BF16:
      return 2;
    case DType::F8_E4M3:
      return 1;
    case DType::E8M0:
      return 1;
    case DType::FP4X2:
      return 1;
    case DType::U8:
      return 1;
    case DType::I32:
      return 4;
    case DType::I64:
      return 8;
  }
  return 0;
}

std::string_view dtype_name(DType t);
// Parses safetensors dtype strings ("BF16", "F8_E4M3", ...). Returns false if unknown.
bool dtype_from_safetensors(std::string_view s, DType* out);
std::string_view dtype_to_safetensors(DType t);

inline float bf16_to_f32(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round to nearest even, NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
float fp8_e4m3_to_f32(uint8_t v);
uint8_t f32_to_fp8_e4m3(float f);  // saturates to +-448, round to nearest even
float e8m0_to_f32(uint8_t v);
float fp4_e2m1_to_f32(uint8_t code);  // code in the low 4 bits
// Nearest e2m1 code (ties to the even code), saturating at +-6; NaN gives +0.
uint8_t f32_to_fp4_e2m1(float f);

// Converts n elements of type `from` at src into fp32 at dst. FP4X2 yields 2n floats.
void convert_to_f32(DType from, const void* src, float* dst, int64_t n);
// Converts n fp32 values into `to` (F32, F16, BF16, F8_E4M3).
void convert_from_f32(DType to, const float* src, void* dst, int64_t n);

}  // namespace tandem
