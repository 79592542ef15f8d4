// Tensor and expert parallelism on the CPU: ranks as threads (ThreadHub) each load their share of
// a checkpoint and run the same forwards; rank 0's logits must equal the unsharded model's within
// fp32 reduction-order tolerance, and every rank must hold the same bits.
#include <filesystem>
#include <thread>

#include "core/rng.h"
#include "distributed/cpu_collectives.h"
#include "distributed/thread_group.h"
#include "model/random_checkpoint.h"
#include "model_test_util.h"

namespace tandem::test {
namespace {

// Sharding changes only how the dot products are split (a sum of tp partial dots instead of one)
// and so the fp32 rounding order. Measured relative L2 error against the unsharded engine (x86-64,
// this build): 2.4e-7 to 8.0e-7 over every model and split below (prompt, decode and MTP logits),
// the same size as the engine's own distance from transformers (golden_test.cpp: up to 1e-6). A
// missing all-reduce or a wrong cut lands at 1e-1 or more.
constexpr double kTol = 2e-6;

struct Outputs {
  std::vector<float> prompt_logits, decode_logits, mtp_logits;
};

// Loads rank r's share and runs: a prompt (all logits), one decode step after it, and the MTP
// layer over the prompt's (h_i, x_{i+1}) pairs.
Outputs run_rank(const std::string& dir, const ShardSpec& s, ProcessGroup* pg,
                 const std::vector<int32_t>& prompt) {
  init_backends();
  LoadOptions lo;
  lo.show_progress = false;
  lo.shard = s;
  std::unique_ptr<Model> model = Model::load(dir, lo);
  std::unique_ptr<CpuCollectives> comm;
  if (pg) {
    comm = std::make_unique<CpuCollectives>(*pg);
    model->set_collectives(comm.get());
  }
  const int64_t page = 16, n = static_cast<int64_t>(prompt.size());
  KvCacheOptions ko;
  ko.page_size = page;
  ko.num_pages = (n + 1 + page - 1) / page + 1;
  ko.with_mtp = true;
  KvCache cache(model->config(), ko);
  std::vector<int32_t> pages;
  for (int64_t i = 0; i < ko.num_pages; ++i) pages.push_back(static_cast<int32_t>(i));
  Outputs out;
  Workspace ws(Device::cpu());
  SequenceChunk ch{&pages, 0, prompt, true};
  ForwardResult r = model->forward(
      ws, build_forward_batch(ForwardMode::kExtend, {ch}, page, Device::cpu()), cache);
  out.prompt_logits = to_float_vector(r.logits);
  SequenceChunk dec{&pages, n, {prompt[1]}, false};
  ForwardResult d = model->forward(
      ws, build_forward_batch(ForwardMode::kDecode, {dec}, page, Device::cpu()), cache);
  out.decode_logits = to_float_vector(d.logits);
  std::vector<int32_t> shifted(prompt.begin() + 1, prompt.end());
  SequenceChunk m{&pages, 0, shifted, true};
  Tensor hid = r.hidden.narrow(0, 0, n - 1).contiguous();
  ForwardResult mr = model->forward_mtp(
      ws, build_forward_batch(ForwardMode::kExtend, {m}, page, Device::cpu()), hid, cache);
  out.mtp_logits = to_float_vector(mr.logits);
  return out;
}

// All ranks of (tp, ep) in threads; returns each rank's outputs.
std::vector<Outputs> run_sharded(const std::string& dir, int64_t tp, int64_t ep,
                                 const std::vector<int32_t>& prompt) {
  auto groups = ThreadHub::make(static_cast<int>(tp));
  std::vector<Outputs> outs(static_cast<size_t>(tp));
  std::vector<std::string> errors(static_cast<size_t>(tp));
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < tp; ++r)
    threads.emplace_back([&, r] {
      try {
        outs[static_cast<size_t>(r)] =
            run_rank(dir, ShardSpec{r, tp, ep}, groups[static_cast<size_t>(r)].get(), prompt);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
        groups[static_cast<size_t>(r)]->abort(e.what());  // the others must not wait forever
      }
    });
  for (auto& t : threads) t.join();
  for (int64_t r = 0; r < tp; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
  return outs;
}

std::vector<int32_t> random_prompt(int64_t V, int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> p;
  for (int64_t i = 0; i < n; ++i) p.push_back(static_cast<int32_t>(rng.next_u64() % V));
  return p;
}

void expect_matches_unsharded(const std::string& dir, const std::vector<std::pair<int, int>>& specs,
                              int64_t prompt_len) {
  const ModelConfig c = ModelConfig::from_file(dir + "/config.json");
  const std::vector<int32_t> prompt = random_prompt(c.vocab_size, prompt_len, 7);
  const Outputs want = run_rank(dir, ShardSpec{}, nullptr, prompt);
  for (auto [tp, ep] : specs) {
    const std::vector<Outputs> got = run_sharded(dir, tp, ep, prompt);
    if (::testing::Test::HasFailure()) return;
    const double ep_ = rel_err(got[0].prompt_logits, want.prompt_logits);
    const double ed = rel_err(got[0].decode_logits, want.decode_logits);
    const double em = rel_err(got[0].mtp_logits, want.mtp_logits);
    std::printf("  %s tp %d ep %d: prompt %.2e decode %.2e mtp %.2e\n",
                std::filesystem::path(dir).filename().c_str(), tp, ep, ep_, ed, em);
    EXPECT_LT(ep_, kTol) << dir << " tp " << tp << " ep " << ep << " prompt logits";
    EXPECT_LT(ed, kTol) << dir << " tp " << tp << " ep " << ep << " decode logits";
    EXPECT_LT(em, kTol) << dir << " tp " << tp << " ep " << ep << " MTP logits";
    for (size_t r = 1; r < got.size(); ++r) {
      EXPECT_EQ(got[r].prompt_logits, got[0].prompt_logits) << "rank " << r << " differs";
      EXPECT_EQ(got[r].decode_logits, got[0].decode_logits) << "rank " << r << " differs";
      EXPECT_EQ(got[r].mtp_logits, got[0].mtp_logits) << "rank " << r << " differs";
    }
  }
}

class GoldenParallel : public ::testing::TestWithParam<std::string> {};

// The golden checkpoints have 4 heads: TP 2 and 4, EP up to the expert count.
TEST_P(GoldenParallel, ShardedLogitsMatchUnsharded) {
  const std::string dir = source_path("tests/data/golden/" + GetParam());
  expect_matches_unsharded(dir, {{2, 1}, {4, 1}, {2, 2}, {4, 4}, {4, 2}}, 40);
}

INSTANTIATE_TEST_SUITE_P(Models, GoldenParallel,
                         ::testing::Values("glm5", "glm5.2", "deepseek-v3", "deepseek-v3.2"),
                         [](const auto& info) { return test_name(info.param); });

// A golden configuration widened to 8 heads and 16 experts so that TP 8 and EP 8 divide it,
// with random weights (the unsharded engine is the oracle here; it matches transformers on the
// golden checkpoints).
std::string wide_checkpoint(const std::string& quant) {
  ModelConfig c = ModelConfig::from_file(source_path("tests/data/golden/glm5.2/config.json"));
  c.num_attention_heads = 8;
  c.n_routed_experts = 16;
  c.moe_intermediate_size = 64;  // 64 / 2: whole MXFP4 groups of 32 under TP 2
  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("tandem_parallel_" + (quant.empty() ? "f32" : quant)))
                              .string();
  RandomCheckpointOptions o;
  o.seed = 11;
  o.dtype = "f32";
  o.quant = quant;
  write_random_checkpoint(c, dir, o);
  return dir;
}

TEST(Parallel, TensorAndExpertParallelEightWays) {
  expect_matches_unsharded(wide_checkpoint(""), {{8, 1}, {8, 8}, {8, 2}, {2, 2}}, 24);
}

// MXFP4 experts: the shares of the expert weights are cut along their 32-wide scale groups and
// stay quantized.
TEST(Parallel, QuantizedExpertsCutAlongScaleGroups) {
  expect_matches_unsharded(wide_checkpoint("mxfp4"), {{2, 1}, {2, 2}, {4, 4}}, 24);
}

TEST(Parallel, UnevenSplitsAreRejectedByName) {
  const ModelConfig c = ModelConfig::from_file(source_path("tests/data/golden/glm5/config.json"));
  EXPECT_THROW(validate_shard(c, ShardSpec{0, 8, 1}), InvalidArgument);  // 4 heads
  EXPECT_THROW(validate_shard(c, ShardSpec{0, 4, 3}), InvalidArgument);  // ep must divide tp
  try {
    validate_shard(c, ShardSpec{0, 8, 1});
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("num_attention_heads"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(validate_shard(c, ShardSpec{3, 4, 4}));
}

}  // namespace
}  // namespace tandem::test
