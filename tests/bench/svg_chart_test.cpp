// bench-offline's SVG: well-formed, every series drawn at its values, text escaped, and missing
// or non-finite values never printed as NaN; and the chart `tandem bench --svg` builds from its
// runs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "bench_client/report.h"
#include "bench_client/svg_chart.h"

namespace tandem::bench {
namespace {

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

TEST(SvgChart, DrawsEverySeriesAndEscapesText) {
  BenchChart c;
  c.title = "model <a&b> on cuda:0";
  c.concurrency = {1, 8, 32};
  c.plain_tok_s = {100, 600, 1500};
  c.mtp_tok_s = {230, 900, 1400};
  c.plain_tpot_ms = {10, 13, 21};
  c.mtp_tpot_ms = {4.3, 8.9, 22.9};
  c.accept_per_position = {{0.9, 0.7, 0.5}, {0.88, 0.69, 0.52}, {0.9, 0.71, 0.49}};
  const std::string svg = render_bench_svg(c);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_EQ(count(svg, "<svg"), 1u);
  EXPECT_EQ(count(svg, "</svg>"), 1u);
  EXPECT_EQ(count(svg, "<polyline"), 4u);  // tok/s and TPOT, plain and MTP
  EXPECT_EQ(count(svg, "<circle"), 12u);   // 4 series x 3 concurrencies
  EXPECT_EQ(count(svg, "<title>c="), 9u);  // 3 concurrencies x 3 draft positions
  EXPECT_NE(svg.find("model &lt;a&amp;b&gt; on cuda:0"), std::string::npos);
  EXPECT_EQ(svg.find("<a&b>"), std::string::npos);
  EXPECT_NE(svg.find("MTP: 1400"), std::string::npos);
  EXPECT_NE(svg.find("c=32 position 3: 0.490"), std::string::npos);
  // The bars stay inside their panel (x from 784 to 1084).
  for (size_t at = svg.find("fill-opacity"); at != std::string::npos;
       at = svg.find("fill-opacity", at + 1)) {
    const size_t x = svg.rfind("<rect x=\"", at) + 9;
    const size_t w = svg.find("width=\"", x) + 7;
    const double left = std::stod(svg.substr(x)), width = std::stod(svg.substr(w));
    EXPECT_GE(left, 784.0);
    EXPECT_LE(left + width, 1084.0);
  }
  // Every opened element is closed or self-closed.
  EXPECT_EQ(count(svg, "<text"), count(svg, "</text>"));
  EXPECT_EQ(count(svg, "<circle"), count(svg, "</circle>"));
}

TEST(SvgChart, MissingSeriesAndNonFiniteValuesAreNotDrawnAsNumbers) {
  BenchChart c;
  c.title = "mtp only";
  c.concurrency = {1};
  c.mtp_tok_s = {std::numeric_limits<double>::quiet_NaN()};
  c.mtp_tpot_ms = {std::numeric_limits<double>::infinity()};
  c.accept_per_position = {{0.5}};
  const std::string svg = render_bench_svg(c);
  EXPECT_EQ(count(svg, "<polyline"), 2u);  // no plain series
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
}

BenchResult run_result(double tok_s, double tpot_ms, std::optional<AcceptLength> accept) {
  BenchResult r;
  r.metrics.output_throughput = tok_s;
  r.metrics.tpot.mean = tpot_ms;
  r.accept_length = std::move(accept);
  return r;
}

TEST(BenchChart, RunsOfTandemBenchInConcurrencyOrder) {
  // A speculating server: every run has an accept length; "no limit" (0) goes last, and a run
  // whose server gave no per-position counters has no bars.
  const std::vector<int64_t> conc = {8, 0, 1};
  const std::vector<BenchResult> runs = {
      run_result(800, 9, AcceptLength{2.5, "metrics", {0.8, 0.5, 0.2}}),
      run_result(1500, 20, AcceptLength{2.4, "server_info", {}}),
      run_result(150, 6, AcceptLength{2.6, "metrics", {0.9, 0.5, 0.2}})};
  const BenchChart c = bench_chart("t", conc, runs);
  EXPECT_EQ(c.concurrency, (std::vector<int64_t>{1, 8, 0}));
  EXPECT_EQ(c.mtp_tok_s, (std::vector<double>{150, 800, 1500}));
  EXPECT_EQ(c.mtp_tpot_ms, (std::vector<double>{6, 9, 20}));
  EXPECT_TRUE(c.plain_tok_s.empty());
  ASSERT_EQ(c.accept_per_position.size(), 3u);
  EXPECT_EQ(c.accept_per_position[0], (std::vector<double>{0.9, 0.5, 0.2}));
  EXPECT_TRUE(c.accept_per_position[2].empty());
  const std::string svg = render_bench_svg(c);
  EXPECT_EQ(count(svg, "<polyline"), 2u);
  EXPECT_EQ(count(svg, "<title>c="), 6u);  // two runs with bars, three positions each
  EXPECT_NE(svg.find(">no limit</text>"), std::string::npos);

  // A plain server: no accept length, the plain series, no bars.
  const BenchChart p = bench_chart("t", {4}, {run_result(300, 12, std::nullopt)});
  EXPECT_EQ(p.plain_tok_s, std::vector<double>{300});
  EXPECT_TRUE(p.mtp_tok_s.empty());
  EXPECT_TRUE(p.accept_per_position.empty());
  EXPECT_EQ(count(render_bench_svg(p), "<polyline"), 2u);
}

}  // namespace
}  // namespace tandem::bench
