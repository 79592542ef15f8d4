#include <gtest/gtest.h>

#include "bench_client/prometheus.h"

namespace tandem::bench {
namespace {

TEST(Prometheus, ReadsTandemCounters) {
  const auto c = parse_spec_counters(
      "# HELP tandem:spec_verify_steps_total Verify rounds, per request\n"
      "# TYPE tandem:spec_verify_steps_total counter\n"
      "tandem:spec_verify_steps_total 120\n"
      "tandem:spec_accepted_tokens_total 240\r\n"
      "tandem:spec_draft_tokens_total 360\n"
      "tandem:spec_accept_length 2.9\n"
      "tandem:spec_accepted_per_position_total{position=\"0\"} 100\n"
      "tandem:generation_tokens_total 5000\n");
  ASSERT_TRUE(c);
  EXPECT_DOUBLE_EQ(c->verify_steps, 120);
  EXPECT_DOUBLE_EQ(c->accepted_tokens, 240);
  EXPECT_EQ(c->accepted_per_position, std::vector<double>{100});
}

TEST(Prometheus, ReadsAcceptedDraftsPerPosition) {
  // Tandem's server: the same counters under tandem: and vllm: names; positions in any order,
  // summed over other labels, never taken from the other namespace.
  auto c = parse_spec_counters(
      "vllm:spec_decode_num_drafts_total{model_name=\"m\"} 10\n"
      "vllm:spec_decode_num_accepted_tokens_total{model_name=\"m\"} 20\n"
      "vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"m\",position=\"0\"} 9\n"
      "tandem:spec_verify_steps_total{model_name=\"m\"} 100\n"
      "tandem:spec_accepted_tokens_total{model_name=\"m\"} 150\n"
      "tandem:spec_accepted_tokens_per_pos_total{model_name=\"m\",position=\"2\"} 20\n"
      "tandem:spec_accepted_tokens_per_pos_total{model_name=\"m\",position=\"0\"} 80\n"
      "tandem:spec_accepted_tokens_per_pos_total{model_name=\"n\",position=\"0\"} 5\n"
      "tandem:spec_accepted_tokens_per_pos_total{model_name=\"m\",position=\"1\"} 50\n"
      "tandem:spec_accepted_tokens_per_pos_total{model_name=\"m\",position=\"x\"} 1\n");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->accepted_per_position, (std::vector<double>{85, 50, 20}));
  // vLLM's own server: its per-position family, with the label not first.
  c = parse_spec_counters(
      "vllm:spec_decode_num_drafts_total{engine=\"0\"} 10\n"
      "vllm:spec_decode_num_accepted_tokens_total{engine=\"0\"} 12\n"
      "vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",position=\"1\"} 4\n"
      "vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",position=\"0\"} 8\n");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->accepted_per_position, (std::vector<double>{8, 4}));
  // None published: empty.
  c = parse_spec_counters("a:spec_verify_steps_total 7\na:spec_accepted_tokens_total 3\n");
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->accepted_per_position.empty());
}

TEST(Prometheus, ReadsVllmCountersSummedOverLabelsAndSkipsCreated) {
  const auto c = parse_spec_counters(
      "vllm:spec_decode_num_drafts_total{engine=\"0\",model_name=\"m}x\"} 10.0\n"
      "vllm:spec_decode_num_drafts_created{engine=\"0\",model_name=\"m\"} 1.7e9\n"
      "vllm:spec_decode_num_drafts_total{engine=\"1\",model_name=\"m\"} 30.0\n"
      "vllm:spec_decode_num_draft_tokens_total{engine=\"0\"} 120.0\n"
      "vllm:spec_decode_num_accepted_tokens_total{engine=\"0\",model_name=\"m\"} 50.0 "
      "1700000000000\n"
      "vllm:spec_decode_num_accepted_tokens_total{engine=\"1\",model_name=\"m\"} 10.0\n"
      "vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",position=\"0\"} 33.0\n");
  ASSERT_TRUE(c);
  EXPECT_DOUBLE_EQ(c->verify_steps, 40);
  EXPECT_DOUBLE_EQ(c->accepted_tokens, 60);
}

TEST(Prometheus, PrefersTandemAndNeverMixesNamespaces) {
  // Tandem's server publishes its counters under tandem: and vllm: names.
  auto c = parse_spec_counters(
      "vllm:spec_decode_num_drafts_total{model_name=\"m\"} 10\n"
      "vllm:spec_decode_num_accepted_tokens_total{model_name=\"m\"} 20\n"
      "tandem:spec_verify_steps_total{model_name=\"m\"} 100\n"
      "tandem:spec_accepted_tokens_total{model_name=\"m\"} 150\n");
  ASSERT_TRUE(c);
  EXPECT_DOUBLE_EQ(c->verify_steps, 100);
  EXPECT_DOUBLE_EQ(c->accepted_tokens, 150);
  // A namespace with only one of the two is passed over, not combined with another's.
  c = parse_spec_counters(
      "a:spec_verify_steps_total 7\n"
      "b:spec_decode_num_drafts_total 10\n"
      "b:spec_decode_num_accepted_tokens_total 20\n");
  ASSERT_TRUE(c);
  EXPECT_DOUBLE_EQ(c->verify_steps, 10);
  EXPECT_DOUBLE_EQ(c->accepted_tokens, 20);
}

TEST(Prometheus, MissingCountersAndDeltas) {
  EXPECT_FALSE(parse_spec_counters("sglang:spec_accept_length 3.1\nsglang:num_running_reqs 4\n"));
  EXPECT_FALSE(parse_spec_counters("tandem:spec_verify_steps_total 4\n"));
  EXPECT_FALSE(parse_spec_counters(""));
  // 30 rounds committed 60 drafts plus 30 bonus tokens: 3 tokens per round.
  EXPECT_DOUBLE_EQ(*accept_length_delta({100, 50}, {130, 110}), 3.0);
  EXPECT_FALSE(accept_length_delta({100, 50}, {100, 50}));  // no rounds ran
  // Per position: the share of the 40 rounds in between that accepted each position; a
  // position first seen in the second scrape counts from 0.
  EXPECT_EQ(acceptance_per_position_delta({100, 50, {80, 30}}, {140, 110, {116, 50, 4}}),
            (std::vector<double>{0.9, 0.5, 0.1}));
  EXPECT_TRUE(acceptance_per_position_delta({100, 50, {80}}, {100, 50, {80}}).empty());
  EXPECT_TRUE(acceptance_per_position_delta({100, 50}, {140, 110}).empty());
}

}  // namespace
}  // namespace tandem::bench
