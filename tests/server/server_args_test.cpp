// SGLang launch flags mapped onto EngineOptions, and the start-up errors for what this build
// cannot do.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "server/server_args.h"

namespace tandem::server {
namespace {

TEST(ServerArgs, MapsOntoEngineOptions) {
  ServerArgs a;
  a.max_running_requests = 8;
  a.page_size = 4;
  a.chunked_prefill_size = 128;
  a.max_total_tokens = 4096;
  a.context_length = 1024;
  a.disable_radix_cache = true;
  a.scheduler_delay_factor = 1.5;
  a.warm_up_tokens = 300;
  const EngineOptions o = engine_options(a, false);
  EXPECT_EQ(o.warm_up_tokens, 300);
  EXPECT_EQ(o.warm_up_tokens_for(Device::cuda(0)), 300);
  EXPECT_EQ(engine_options(ServerArgs{}, false).warm_up_tokens_for(Device::cpu()), 0);
  EXPECT_EQ(o.max_running_requests, 8);
  EXPECT_EQ(o.page_size, 4);
  EXPECT_EQ(o.chunked_prefill_size, 128);
  EXPECT_EQ(o.max_total_tokens, 4096);
  EXPECT_EQ(o.context_length, 1024);
  EXPECT_FALSE(o.enable_prefix_cache);
  EXPECT_EQ(o.scheduler_delay_factor, 1.5);
  EXPECT_FALSE(o.spec.enabled());
}

TEST(ServerArgs, Speculative) {
  ServerArgs a;
  a.speculative_algorithm = "EAGLE";
  a.speculative_num_steps = 2;
  a.speculative_num_draft_tokens = 8;  // SGLang adjusts this to steps + 1 for topk 1
  std::vector<std::string> warnings;
  const EngineOptions o = engine_options(a, false, &warnings);
  EXPECT_EQ(o.spec.algorithm, "EAGLE");
  EXPECT_EQ(o.spec.num_steps, 2);
  EXPECT_EQ(o.spec.num_draft_tokens, 3);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("--speculative-num-draft-tokens"), std::string::npos);
  a.speculative_algorithm = "nextn";
  EXPECT_EQ(engine_options(a, false).spec.algorithm, "NEXTN");
  // Adaptive depth is on by default and reaches max(num_steps, 5); pinned, the depth is S.
  EXPECT_TRUE(o.spec.adaptive);
  EXPECT_EQ(o.spec.max_steps, 5);
  EXPECT_EQ(o.spec.max_depth(), 5);
  a.speculative_num_steps = 7;
  EXPECT_EQ(engine_options(a, false).spec.max_depth(), 7);
  a.speculative_max_steps = 8;
  EXPECT_EQ(engine_options(a, false).spec.max_depth(), 8);
  a.speculative_adaptive = false;
  EXPECT_EQ(engine_options(a, false).spec.max_depth(), 7);
  EXPECT_EQ(a.to_json()["speculative_adaptive"], false);
  // Prompts read with their prefill: off unless asked for (engine_options.h says why).
  a.speculative_adaptive = true;
  EXPECT_FALSE(engine_options(a, false).spec.draft_reads_prompts);
  a.speculative_draft_reads_prompts = true;
  EXPECT_TRUE(engine_options(a, false).spec.draft_reads_prompts);
  EXPECT_EQ(a.to_json()["speculative_draft_reads_prompts"], true);
}

void expect_invalid(const ServerArgs& a, const std::string& needle) {
  try {
    engine_options(a, false);
    ADD_FAILURE() << "accepted; expected an error about " << needle;
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(ServerArgs, StartupErrors) {
  ServerArgs a;
  a.speculative_algorithm = "EAGLE";
  a.speculative_eagle_topk = 4;
  expect_invalid(a, "--speculative-eagle-topk");
  a = ServerArgs{};
  a.speculative_algorithm = "EAGLE3";
  expect_invalid(a, "--speculative-algorithm");
  a = ServerArgs{};
  a.speculative_algorithm = "EAGLE";
  a.speculative_num_steps = 4;
  a.speculative_max_steps = 3;
  expect_invalid(a, "--speculative-max-steps");
  a.speculative_max_steps = 9;
  expect_invalid(a, "--speculative-max-steps");
  a = ServerArgs{};
  a.warm_up_tokens = -2;
  expect_invalid(a, "--warm-up-tokens");
  a = ServerArgs{};
  a.tp_size = 0;
  expect_invalid(a, "--tp-size");
  a = ServerArgs{};
  a.tp_size = 4;
  a.ep_size = 3;
  expect_invalid(a, "--ep-size");
  a = ServerArgs{};
  a.tp_size = 4;
  a.nnodes = 3;
  expect_invalid(a, "--nnodes");
  a = ServerArgs{};
  a.tp_size = 4;
  a.nnodes = 2;  // several nodes need rank 0's address
  expect_invalid(a, "--dist-init-addr");
  a.dist_init_addr = "10.0.0.1:5000";
  a.node_rank = 2;
  expect_invalid(a, "--node-rank");
  a = ServerArgs{};
  a.device = "cuda";
  expect_invalid(a, "--device cuda");
  a = ServerArgs{};
  a.device = "tpu";
  expect_invalid(a, "--device");
  a = ServerArgs{};
  a.page_size = -1;
  expect_invalid(a, "--page-size");
  for (double f : {-1.0, 1e9, std::nan("")}) {
    a = ServerArgs{};
    a.scheduler_delay_factor = f;
    expect_invalid(a, "--scheduler-delay-factor");
  }
  a = ServerArgs{};  // 0 (the default): 16 on the CPU, 64 on CUDA
  EXPECT_EQ(engine_options(a, false).page_size, 16);
  a = ServerArgs{};
  a.model_loader_extra_config = "{not json";
  expect_invalid(a, "--model-loader-extra-config");
  a = ServerArgs{};
  a.model_loader_extra_config = R"({"online_quant_config":{"global_quant_config":"int8"}})";
  expect_invalid(a, "online_quant_config.global_quant_config");
  a = ServerArgs{};
  a.quantization = "awq";
  expect_invalid(a, "--quantization 'awq'");
  a = ServerArgs{};
  a.reasoning_parser = "auto";  // removed: reasoning is split only when a parser is named
  expect_invalid(a, "--reasoning-parser");
  a = ServerArgs{};
  a.tool_call_parser = "hermes";
  expect_invalid(a, "--tool-call-parser");
}

TEST(ServerArgs, OutputParsers) {
  ServerArgs a;
  EXPECT_TRUE(a.reasoning_parser.empty());  // none by default, as SGLang
  EXPECT_TRUE(a.to_json()["reasoning_parser"].is_null());
  EXPECT_TRUE(a.to_json()["tool_call_parser"].is_null());
  for (const char* r : {"none", "glm45", "deepseek-r1", "deepseek-v3"})
    for (const char* t : {"glm45", "glm47", "deepseekv3", "deepseekv31", "deepseekv32"}) {
      a.reasoning_parser = r;
      a.tool_call_parser = t;
      EXPECT_NO_THROW(engine_options(a, false)) << r << " " << t;
    }
  EXPECT_EQ(a.to_json()["tool_call_parser"], "deepseekv32");
}

TEST(ServerArgs, OnlineQuantizationFlagsAreAccepted) {
  // SGLang's ptpc_fp8 launch flag, verbatim, and --quantization fp8: checked here, applied at load.
  ServerArgs a;
  a.model_loader_extra_config =
      R"({"online_quant_config":{"global_quant_config":"ptpc_fp8","exclude_layer":["lm_head","model.embed_tokens","*.mlp.gate","*expert*"]}})";
  std::vector<std::string> warnings;
  EXPECT_NO_THROW(engine_options(a, false, &warnings));
  EXPECT_TRUE(warnings.empty());
  a = ServerArgs{};
  a.quantization = "fp8";
  EXPECT_NO_THROW(engine_options(a, false));
  EXPECT_EQ(a.to_json()["quantization"], "fp8");
}

// SGLang's names: auto / bf16 / bfloat16 keep the compute dtype, fp8_e4m3 and fp8 select the
// FP8 rows, silently; anything else is refused at start-up.
TEST(ServerArgs, KvCacheDtype) {
  for (const char* v : {"auto", "bf16", "bfloat16", "fp8_e4m3", "fp8"}) {
    ServerArgs a;
    a.kv_cache_dtype = v;
    std::vector<std::string> warnings;
    const EngineOptions o = engine_options(a, false, &warnings);
    EXPECT_EQ(o.kv_cache_fp8, std::string(v).rfind("fp8", 0) == 0) << v;
    EXPECT_TRUE(warnings.empty()) << v << ": " << (warnings.empty() ? "" : warnings[0]);
  }
  for (const char* v : {"fp8_e5m2", "int8", "", "FP8"}) {
    ServerArgs a;
    a.kv_cache_dtype = v;
    expect_invalid(a, "--kv-cache-dtype");
  }
}

TEST(ServerArgs, CpuNotes) {
  ServerArgs a;
  a.mem_fraction_static = 0.8;
  a.disable_cuda_graph = true;
  std::vector<std::string> warnings;
  engine_options(a, false, &warnings);
  EXPECT_EQ(warnings.size(), 2u);
  const Json j = a.to_json();
  EXPECT_EQ(j["mem_fraction_static"], 0.8);
  EXPECT_EQ(j["port"], 30000);
  EXPECT_EQ(j["host"], "127.0.0.1");
}

// A Hub id becomes its snapshot in the cache; the API still calls the model by the id.
TEST(ServerArgs, HubIdsResolveAndKeepTheIdAsModelName) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / "tandem_server_args_hub";
  fs::remove_all(root);
  const std::string hash(40, 'a');
  const fs::path snap = root / "models--org--name" / "snapshots" / hash;
  fs::create_directories(snap);
  fs::create_directories(root / "models--org--name" / "refs");
  std::ofstream(root / "models--org--name" / "refs" / "main") << hash;
  const HubEnv env{root.string(), "", ""};

  ServerArgs a;
  a.model_path = "org/name";
  a.tokenizer_path = "org/name";
  resolve_hub_ids(a, env);
  EXPECT_EQ(a.model_path, snap.string());
  EXPECT_EQ(a.tokenizer_path, snap.string());
  EXPECT_EQ(a.model_name(), "org/name");

  ServerArgs named;
  named.model_path = "org/name";
  named.served_model_name = "mine";
  resolve_hub_ids(named, env);
  EXPECT_EQ(named.model_name(), "mine");

  ServerArgs missing;
  missing.model_path = "org/other";
  try {
    resolve_hub_ids(missing, env);
    ADD_FAILURE() << "a missing id resolved";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("--model-path org/other"), std::string::npos) << e.what();
  }
  ServerArgs bad_tok;
  bad_tok.model_path = "org/name";
  bad_tok.tokenizer_path = "org/other";
  bad_tok.revision = hash;
  try {
    resolve_hub_ids(bad_tok, env);
    ADD_FAILURE() << "a missing tokenizer id resolved";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("--tokenizer-path org/other"), std::string::npos)
        << e.what();
  }
  fs::remove_all(root);
}

}  // namespace
}  // namespace tandem::server
