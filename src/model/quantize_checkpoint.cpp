#include "model/quantize_checkpoint.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>
#include <vector>

#include "core/error.h"
#include "model/checkpoint.h"
#include "model/config.h"
#include "model/quant_scheme.h"
#include "model/random_checkpoint.h"
#include "model/weight_names.h"

namespace tandem {

void quantize_checkpoint(const std::string& src_dir, const std::string& dst_dir,
                         const std::string& quant, uint64_t max_shard_bytes) {
  namespace fs = std::filesystem;
  if (quant != "fp8" && quant != "mxfp4")
    fail("make-checkpoint --from: --quant must be fp8 or mxfp4, got '{}'", quant);
  if (fs::exists(dst_dir) && fs::equivalent(src_dir, dst_dir))
    fail("make-checkpoint --from: --out must differ from the source folder");
  const fs::path src(src_dir);
  std::ifstream cfg_in(src / "config.json");
  if (!cfg_in) fail("{}: no config.json", src_dir);
  nlohmann::ordered_json cfg_json = nlohmann::ordered_json::parse(cfg_in);
  ModelConfig c = ModelConfig::from_file((src / "config.json").string());
  if (!c.quant.method.empty())
    fail("{}: already quantized ({}); quantize a bf16 or f32 checkpoint", src_dir, c.quant.method);
  c.quant = quant == "fp8" ? fp8_checkpoint_quant(c) : mxfp4_checkpoint_quant(c);
  const Checkpoint ck = Checkpoint::open(src_dir);

  std::vector<std::pair<std::string, Tensor>> out;
  std::set<std::string> done;
  for (const TensorSpec& s : weight_name_table(c, /*include_mtp=*/true)) {
    const std::string name = s.name();
    if (!ck.has(name)) continue;  // optional duplicates; the loader reports missing ones
    const QuantScheme q = quant_scheme(c, s);
    if (q.format == WeightFormat::kDense) continue;  // copied as stored below
    const Tensor w = ck.tensor(name).to_f32();       // [N, K]
    if (q.format == WeightFormat::kFp8Block) {
      auto [qw, sc] = quantize_fp8_block(w, q.block_n, q.block_k);
      out.emplace_back(name, qw);                            // [N, K] e4m3
      out.emplace_back(s.module + ".weight_scale_inv", sc);  // [nb, kb] f32
    } else {
      auto [qw, sc] = quantize_mxfp4(w, q.block_k);
      out.emplace_back(name, qw);                        // [N, K/2] u8, two e2m1 per byte
      out.emplace_back(s.module + ".weight_scale", sc);  // [N, K/32] u8 e8m0
    }
    done.insert(name);
  }
  for (const std::string& name : ck.names())
    if (!done.count(name)) out.emplace_back(name, ck.tensor(name));

  fs::create_directories(dst_dir);
  write_checkpoint_shards(dst_dir, out, max_shard_bytes);
  // config.json as the source wrote it, plus the quantization_config.
  cfg_json["quantization_config"] = c.to_json()["quantization_config"];
  std::ofstream(fs::path(dst_dir) / "config.json") << cfg_json.dump(2) << "\n";
  // Tokenizer, generation config, model card: everything that is not weights or the index.
  for (const auto& e : fs::directory_iterator(src)) {
    const std::string f = e.path().filename().string();
    if (!e.is_regular_file() || f == "config.json" || e.path().extension() == ".safetensors" ||
        f.find(".safetensors.index.json") != std::string::npos)
      continue;
    fs::copy_file(e.path(), fs::path(dst_dir) / f, fs::copy_options::overwrite_existing);
  }
}

}  // namespace tandem
