// Safetensors and checkpoint validation: every broken input is an error naming the file and
// the tensor, never a crash.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/checkpoint.h"
#include "model/loader.h"
#include "model/presets.h"
#include "model/random_checkpoint.h"
#include "model/safetensors.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("tandem_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& n) const { return (path_ / n).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
  static inline int counter_ = 0;
};

std::string read_all(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
void write_all(const std::string& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary);
  out << s;
}

// Raw file with a hand-written header (for shapes the writer would never produce).
std::string raw_file(const std::string& header, size_t data_bytes) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + std::string(data_bytes, '\x11');
}

std::string error_opening(const std::string& path) {
  try {
    SafetensorsFile::open(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Safetensors, RoundTripAllDtypes) {
  TempDir d;
  std::vector<std::pair<std::string, Tensor>> ts;
  ts.emplace_back("a.f32", Tensor::from_vector(
                               std::vector<float>{1.5f, -2.0f, 3.25f, 0.5f, 9.f, -7.f}, {2, 3}));
  ts.emplace_back("b.bf16", ts[0].second.to_dtype(DType::BF16));
  ts.emplace_back("c.f16", ts[0].second.to_dtype(DType::F16));
  ts.emplace_back("d.fp8", ts[0].second.to_dtype(DType::F8_E4M3));
  ts.emplace_back("e.i32", Tensor::from_vector(std::vector<int32_t>{1, -2, 3}, {3}));
  Tensor i64 = Tensor::empty({2}, DType::I64), u8 = Tensor::empty({4}, DType::U8);
  i64.data<int64_t>()[0] = -5, i64.data<int64_t>()[1] = 1ll << 40;
  for (int i = 0; i < 4; ++i) u8.data<uint8_t>()[i] = static_cast<uint8_t>(i * 60);
  ts.emplace_back("f.i64", i64);
  ts.emplace_back("g.u8", u8);
  write_safetensors(d.file("x.safetensors"), ts, {{"format", "pt"}});
  auto f = SafetensorsFile::open(d.file("x.safetensors"));
  EXPECT_EQ(f->metadata().at("format"), "pt");
  EXPECT_EQ(to_float_vector(f->tensor("a.f32")), to_float_vector(ts[0].second));
  EXPECT_EQ(to_float_vector(f->tensor("b.bf16")),
            to_float_vector(ts[0].second));  // exactly representable
  EXPECT_EQ(to_float_vector(f->tensor("c.f16")), to_float_vector(ts[0].second));
  EXPECT_EQ(to_float_vector(f->tensor("d.fp8")), to_float_vector(ts[0].second));
  EXPECT_EQ(to_int_vector(f->tensor("e.i32")), (std::vector<int32_t>{1, -2, 3}));
  EXPECT_EQ(f->tensor("f.i64").data<int64_t>()[1], 1ll << 40);
  EXPECT_EQ(f->tensor("g.u8").data<uint8_t>()[3], 180);
  EXPECT_EQ(f->entry("a.f32").shape, (std::vector<int64_t>{2, 3}));
  // Each tensor is aligned to its element size (name order put f.i64 at byte 66, and reading it
  // through int64_t* was undefined behaviour: found by the ASan/UBSan build).
  for (const auto& [name, e] : f->entries())
    EXPECT_EQ(e.begin % static_cast<uint64_t>(dtype_size(e.dtype)), 0u) << name;
}

TEST(Safetensors, TruncatedFileNamesFileAndTensor) {
  TempDir d;
  write_safetensors(d.file("x.safetensors"), {{"w", Tensor::zeros({64, 64}, DType::F32)}});
  std::string bytes = read_all(d.file("x.safetensors"));
  write_all(d.file("x.safetensors"), bytes.substr(0, bytes.size() - 100));
  const std::string e = error_opening(d.file("x.safetensors"));
  EXPECT_NE(e.find("x.safetensors"), std::string::npos) << e;
  EXPECT_NE(e.find("'w'"), std::string::npos) << e;
  write_all(d.file("tiny.safetensors"), "abc");
  EXPECT_NE(error_opening(d.file("tiny.safetensors")).find("truncated"), std::string::npos);
}

TEST(Safetensors, BadHeaders) {
  TempDir d;
  const std::string p = d.file("h.safetensors");
  // Header length larger than the file.
  std::string f = raw_file("{}", 0);
  f[0] = '\xff', f[1] = '\xff';
  write_all(p, f);
  EXPECT_NE(error_opening(p).find("header"), std::string::npos);
  write_all(p, raw_file("{not json", 0));
  EXPECT_NE(error_opening(p).find("not valid JSON"), std::string::npos);
  write_all(p, raw_file(R"({"w":{"dtype":"Q7","shape":[2],"data_offsets":[0,2]}})", 2));
  std::string e = error_opening(p);
  EXPECT_NE(e.find("'w'"), std::string::npos);
  EXPECT_NE(e.find("dtype"), std::string::npos) << e;
  write_all(p, raw_file(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8));
  e = error_opening(p);
  EXPECT_NE(e.find("needs 12 bytes"), std::string::npos) << e;
  write_all(
      p,
      raw_file(
          R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})",
          6));
  EXPECT_NE(error_opening(p).find("overlap"), std::string::npos);
  write_all(p, raw_file(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})", 0));
  EXPECT_NE(error_opening(p).find("bad shape"), std::string::npos);
  write_all(p, raw_file(R"({"w":{"dtype":"F32","shape":[1]}})", 4));
  EXPECT_NE(error_opening(p).find("data_offsets"), std::string::npos);
  EXPECT_NE(error_opening(d.file("missing.safetensors")).find("cannot open"), std::string::npos);
}

// Shapes and offsets come from the file; none of the size arithmetic may wrap.
TEST(Safetensors, HugeShapesAndOffsetsAreRefused) {
  TempDir d;
  const std::string p = d.file("big.safetensors");
  // 2^32 * 2^32 elements wrap to 0 in 64 bits, which would match empty data_offsets.
  for (const char* dtype : {"U8", "F32"}) {
    write_all(p, raw_file(fmt::format(R"({{"w":{{"dtype":"{}","shape":[4294967296,4294967296],)"
                                      R"("data_offsets":[0,0]}}}})",
                                      dtype),
                          8));
    const std::string e = error_opening(p);
    EXPECT_NE(e.find("big.safetensors"), std::string::npos) << e;
    EXPECT_NE(e.find("'w'"), std::string::npos) << e;
    EXPECT_NE(e.find("shape"), std::string::npos) << e;
  }
  // 2^62 four-byte elements: the byte count overflows even though the element count does not.
  write_all(
      p,
      raw_file(R"({"w":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}})", 8));
  EXPECT_NE(error_opening(p).find("'w'"), std::string::npos) << error_opening(p);
  // A negative dim.
  write_all(p, raw_file(R"({"w":{"dtype":"U8","shape":[4,-4],"data_offsets":[0,0]}})", 8));
  std::string e = error_opening(p);
  EXPECT_NE(e.find("'w'"), std::string::npos) << e;
  EXPECT_NE(e.find("bad shape"), std::string::npos) << e;
  // Offsets past the end of the file, including ones that would wrap when added to the header.
  for (const char* off : {"[8,12]", "[18446744073709551612,18446744073709551615]"}) {
    write_all(
        p,
        raw_file(fmt::format(R"({{"w":{{"dtype":"U8","shape":[4],"data_offsets":{}}}}})", off), 8));
    e = error_opening(p);
    EXPECT_NE(e.find("big.safetensors"), std::string::npos) << e;
    EXPECT_NE(e.find("'w'"), std::string::npos) << e;
    EXPECT_NE(e.find("outside"), std::string::npos) << e;
  }
}

std::string error_loading(const std::string& dir) {
  try {
    const ModelConfig c = ModelConfig::from_file(dir + "/config.json");
    LoadOptions o;
    o.show_progress = false;
    load_weights(Checkpoint::open(dir), c, o);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Checkpoint, ShardedIndexMissingShardAndMissingTensor) {
  TempDir d;
  const ModelConfig c = preset_config("tiny-glm5.2");
  RandomCheckpointOptions o;
  o.max_shard_bytes = 64 << 10;  // many shards
  write_random_checkpoint(c, d.path().string(), o);
  ASSERT_TRUE(fs::exists(d.path() / "model.safetensors.index.json"));
  EXPECT_EQ(error_loading(d.path().string()), "");
  // The index promises a tensor that its shard lacks.
  nlohmann::json idx = nlohmann::json::parse(read_all(d.file("model.safetensors.index.json")));
  const std::string shard = idx["weight_map"]["lm_head.weight"];
  idx["weight_map"]["model.layers.0.extra.weight"] = shard;
  write_all(d.file("model.safetensors.index.json"), idx.dump());
  std::string e = error_loading(d.path().string());
  EXPECT_NE(e.find("model.layers.0.extra.weight"), std::string::npos) << e;
  EXPECT_NE(e.find(shard), std::string::npos) << e;
  // A shard file is gone.
  idx["weight_map"].erase("model.layers.0.extra.weight");
  write_all(d.file("model.safetensors.index.json"), idx.dump());
  fs::remove(d.path() / shard);
  e = error_loading(d.path().string());
  EXPECT_NE(e.find(shard), std::string::npos) << e;
  EXPECT_NE(e.find("missing"), std::string::npos) << e;
}

TEST(Checkpoint, MissingTensorWrongShapeAndWrongDtype) {
  TempDir d;
  const ModelConfig c = preset_config("tiny-glm5");
  write_random_checkpoint(c, d.path().string(), {});
  auto f = SafetensorsFile::open(d.file("model.safetensors"));
  std::vector<std::pair<std::string, Tensor>> ts;
  for (const auto& [n, e] : f->entries())
    if (n != "model.layers.2.self_attn.o_proj.weight")
      ts.emplace_back(n, f->tensor(n).contiguous().clone());
  f.reset();
  write_safetensors(d.file("model.safetensors"), ts);
  std::string e = error_loading(d.path().string());
  EXPECT_NE(e.find("model.layers.2.self_attn.o_proj.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("missing"), std::string::npos) << e;
  // Wrong shape.
  ts.emplace_back("model.layers.2.self_attn.o_proj.weight", Tensor::zeros({64, 63}, DType::BF16));
  write_safetensors(d.file("model.safetensors"), ts);
  e = error_loading(d.path().string());
  EXPECT_NE(e.find("model.layers.2.self_attn.o_proj.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("shape"), std::string::npos) << e;
  EXPECT_NE(e.find("model.safetensors"), std::string::npos) << e;
  // A dtype a norm cannot use.
  ts.back().second = Tensor::zeros({64, 64}, DType::BF16);
  for (auto& [n, t] : ts)
    if (n == "model.norm.weight") t = Tensor::zeros({64}, DType::I32);
  write_safetensors(d.file("model.safetensors"), ts);
  e = error_loading(d.path().string());
  EXPECT_NE(e.find("model.norm.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("i32"), std::string::npos) << e;
}

TEST(Checkpoint, Fp8WithoutScaleIsAnError) {
  TempDir d;
  const ModelConfig c = preset_config("tiny-glm5");
  RandomCheckpointOptions o;
  o.quant = "fp8";
  write_random_checkpoint(c, d.path().string(), o);
  EXPECT_EQ(error_loading(d.path().string()), "");
  auto f = SafetensorsFile::open(d.file("model.safetensors"));
  std::vector<std::pair<std::string, Tensor>> ts;
  for (const auto& [n, e] : f->entries())
    if (n != "model.layers.1.self_attn.q_b_proj.weight_scale_inv")
      ts.emplace_back(n, f->tensor(n).clone());
  f.reset();
  write_safetensors(d.file("model.safetensors"), ts);
  const std::string e = error_loading(d.path().string());
  EXPECT_NE(e.find("q_b_proj.weight_scale_inv"), std::string::npos) << e;
}

}  // namespace
}  // namespace tandem
