#include "core/dtype.h"

#include <cmath>

#include "core/error.h"

namespace tandem {

namespace {
struct DTypeName {
  DType t;
  std::string_view name;
  std::string_view st;  // safetensors spelling
};
constexpr DTypeName kNames[] = {
    {DType::F32, "f32", "F32"},       {DType::F16, "f16", "F16"},
    {DType::BF16, "bf16", "BF16"},    {DType::F8_E4M3, "f8_e4m3", "F8_E4M3"},
    {DType::E8M0, "e8m0", "F8_E8M0"}, {DType::FP4X2, "fp4x2", "F4"},
    {DType::U8, "u8", "U8"},          {DType::I32, "i32", "I32"},
    {DType::I64, "i64", "I64"},
};
}  // namespace

std::string_view dtype_name(DType t) {
  for (const auto& n : kNames)
    if (n.t == t) return n.name;
  return "?";
}

bool dtype_from_safetensors(std::string_view s, DType* out) {
  for (const auto& n : kNames) {
    if (n.st == s) {
      *out = n.t;
      return true;
    }
  }
  return false;
}

std::string_view dtype_to_safetensors(DType t) {
  for (const auto& n : kNames)
    if (n.t == t) return n.st;
  return "?";
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  float v;
  if (exp == 0) {
    v = std::ldexp(static_cast<float>(man), -24);
  } else if (exp == 31) {
    v = man ? NAN : INFINITY;
  } else {
    v = std::ldexp(static_cast<float>(man | 0x400), static_cast<int>(exp) - 25);
  }
  return sign ? -v : v;
}

uint16_t f32_to_f16(float f) {
  // Exact round-to-nearest-even through the bit pattern.
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (a < 0x38800000u) {                                               // subnormal or zero
    float af;
    std::memcpy(&af, &a, 4);
    const float scaled = af * 16777216.0f;  // 2^24: units of the smallest subnormal
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(scaled)));
  }
  const uint32_t mant_odd = (a >> 13) & 1u;
  a += 0xfffu + mant_odd;
  return static_cast<uint16_t>(sign | ((a - 0x38000000u) >> 13));
}

float fp8_e4m3_to_f32(uint8_t v) {
  const int sign = v >> 7, exp = (v >> 3) & 0xf, man = v & 7;
  if (exp == 15 && man == 7) return NAN;
  float r = exp == 0 ? std::ldexp(static_cast<float>(man), -9)
                     : std::ldexp(static_cast<float>(8 + man), exp - 10);
  return sign ? -r : r;
}

uint8_t f32_to_fp8_e4m3(float f) {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  float a = std::fabs(f);
  if (a == 0.0f) return sign;
  if (a >= 448.0f) return sign | 0x7e;  // saturate to max finite
  // Smallest normal is 2^-6; subnormals step by 2^-9.
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5,1)
  int exp_field = e - 1 + 7;
  if (exp_field < 1) {
    const float q = std::nearbyint(a * 512.0f);  // units of 2^-9
    if (q >= 8) return sign | 0x08;              // rounds up to the smallest normal
    return sign | static_cast<uint8_t>(q);
  }
  const float step = std::ldexp(1.0f, e - 1 - 3);  // mantissa step in this binade
  float q = std::nearbyint(a / step);              // in [8, 16]
  if (q >= 16) {
    q = 8;
    ++exp_field;
  }
  if (exp_field > 15 || (exp_field == 15 && q - 8 > 6)) return sign | 0x7e;
  return sign | static_cast<uint8_t>(exp_field << 3) | static_cast<uint8_t>(q - 8);
}

float e8m0_to_f32(uint8_t v) {
  if (v == 0xff) return NAN;
  return std::ldexp(1.0f, static_cast<int>(v) - 127);
}

float fp4_e2m1_to_f32(uint8_t code) {
  static constexpr float kMag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float m = kMag[code & 7];
  return (code & 8) ? -m : m;
}

uint8_t f32_to_fp4_e2m1(float f) {
  static constexpr float kMag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  if (std::isnan(f)) return 0;
  const float a = std::fabs(f);
  uint8_t best = 7;  // beyond 6: saturate
  for (uint8_t c = 0; c < 7; ++c) {
    const float mid = 0.5f * (kMag[c] + kMag[c + 1]);  // exact: the grid has few bits
    if (a < mid || (a == mid && c % 2 == 0)) {
      best = c;
      break;
    }
  }
  return static_cast<uint8_t>(best | (std::signbit(f) && best != 0 ? 8 : 0));
}

void convert_to_f32(DType from, const void* src, float* dst, int64_t n) {
  switch (from) {
    case DType::F32:
      std::memcpy(dst, src, n * 4);
      return;
    case DType::BF16: {
      auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    case DType::F16: {
      auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
      return;
    }
    case DType::F8_E4M3: {
      auto* s = static_cast<const uint8_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp8_e4m3_to_f32(s[i]);
      return;
    }
    case DType::E8M0: {
      auto* s = static_cast<const uint8_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = e8m0_to_f32(s[i]);
      return;
    }
    case DType::FP4X2: {
      auto* s = static_cast<const uint8_t*>(src);
      for (int64_t i = 0; i < n; ++i) {
        dst[2 * i] = fp4_e2m1_to_f32(s[i] & 0xf);
        dst[2 * i + 1] = fp4_e2m1_to_f32(s[i] >> 4);
      }
      return;
    }
    case DType::U8: {
      auto* s = static_cast<const uint8_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = s[i];
      return;
    }
    case DType::I32: {
      auto* s = static_cast<const int32_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(s[i]);
      return;
    }
    case DType::I64: {
      auto* s = static_cast<const int64_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(s[i]);
      return;
    }
  }
}

void convert_from_f32(DType to, const float* src, void* dst, int64_t n) {
  switch (to) {
    case DType::F32:
      std::memcpy(dst, src, n * 4);
      return;
    case DType::BF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
      return;
    }
    case DType::F16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_f16(src[i]);
      return;
    }
    case DType::F8_E4M3: {
      auto* d = static_cast<uint8_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_fp8_e4m3(src[i]);
      return;
    }
    default:
      fail("convert_from_f32: unsupported target dtype {}", dtype_name(to));
  }
}

}  // namespace tandem
