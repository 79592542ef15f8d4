#include "bench_client/svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace tandem::bench {

namespace {

constexpr double kPanelW = 300, kPanelH = 220, kMargin = 48, kTop = 40;
const char* kPlain = "#4c72b0";
const char* kMtp = "#dd8452";

std::string escape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    switch (ch) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += ch;
    }
  }
  return o;
}

std::string concurrency_label(int64_t c) {
  return c > 0 ? fmt::format("c={}", c) : "no limit";
}

// A nice upper bound for an axis: 1, 2 or 5 times a power of ten at or above v.
double nice_max(double v) {
  if (!(v > 0)) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= v) return m * p;
  return 10 * p;
}

struct Panel {
  double x0, y0;  // top-left of the plot area
  double ymax;
  bool bars;  // x positions are the centres of n equal slots (bar groups), not edge to edge
  std::string svg;

  double px(size_t i, size_t n) const {  // concurrency points spread evenly (log-like spacing)
    if (bars) return x0 + kPanelW * (static_cast<double>(i) + 0.5) / static_cast<double>(n);
    return x0 +
           (n <= 1 ? kPanelW / 2 : kPanelW * static_cast<double>(i) / static_cast<double>(n - 1));
  }
  double py(double v) const { return y0 + kPanelH - kPanelH * std::min(v, ymax) / ymax; }
};

Panel axes(double x0, const std::string& title, const std::string& ylabel, double ymax,
           const std::vector<std::string>& xlabels, bool bars = false) {
  Panel p{x0, kTop + 24, ymax, bars, {}};
  p.svg += fmt::format(
      "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"13\" text-anchor=\"middle\">{}</text>\n",
      x0 + kPanelW / 2, kTop + 12, escape(title));
  p.svg += fmt::format(
      "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\" "
      "stroke=\"#888\"/>\n",
      x0, p.y0, kPanelW, kPanelH);
  for (int k = 0; k <= 4; ++k) {  // y grid and labels
    const double v = ymax * k / 4, y = p.py(v);
    p.svg += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>"
        "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"10\" text-anchor=\"end\">{:g}</text>\n",
        x0, y, x0 + kPanelW, y, x0 - 4, y + 3, v);
  }
  for (size_t i = 0; i < xlabels.size(); ++i)
    p.svg += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"10\" text-anchor=\"middle\">{}</text>\n",
        p.px(i, xlabels.size()), p.y0 + kPanelH + 14, escape(xlabels[i]));
  p.svg += fmt::format(
      "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"10\" text-anchor=\"middle\" "
      "transform=\"rotate(-90 {:.1f} {:.1f})\">{}</text>\n",
      x0 - 36, p.y0 + kPanelH / 2, x0 - 36, p.y0 + kPanelH / 2, escape(ylabel));
  return p;
}

void line(Panel& p, const std::vector<double>& ys, const char* color, const std::string& name,
          int legend_row) {
  if (ys.empty()) return;
  std::string pts;
  for (size_t i = 0; i < ys.size(); ++i)
    pts += fmt::format("{:.1f},{:.1f} ", p.px(i, ys.size()), p.py(ys[i]));
  p.svg += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n",
                       pts, color);
  for (size_t i = 0; i < ys.size(); ++i)
    p.svg += fmt::format(
        "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"><title>{}: {:.4g}"
        "</title></circle>\n",
        p.px(i, ys.size()), p.py(ys[i]), color, escape(name), ys[i]);
  const double ly = p.y0 + 12 + 14 * legend_row;
  p.svg += fmt::format(
      "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"10\" height=\"10\" fill=\"{}\"/>"
      "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"10\">{}</text>\n",
      p.x0 + 8, ly - 9, color, p.x0 + 22, ly, escape(name));
}

double max_of(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (double v : a) m = std::max(m, std::isfinite(v) ? v : 0);
  for (double v : b) m = std::max(m, std::isfinite(v) ? v : 0);
  return m;
}

}  // namespace

std::string render_bench_svg(const BenchChart& c) {
  std::vector<std::string> xs;
  for (int64_t v : c.concurrency) xs.push_back(concurrency_label(v));
  const double width = 3 * (kPanelW + kMargin + 20) + kMargin, height = kTop + kPanelH + 70;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" "
      "font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{:.1f}\" y=\"18\" font-size=\"15\" font-weight=\"bold\">{}</text>\n",
      width, height, kMargin, escape(c.title));
  const auto is_finite = [](const std::vector<double>& v) {
    std::vector<double> o;
    for (double x : v) o.push_back(std::isfinite(x) ? x : 0);
    return o;
  };

  Panel tok =
      axes(kMargin, "output tokens/s", "tok/s", nice_max(max_of(c.plain_tok_s, c.mtp_tok_s)), xs);
  line(tok, is_finite(c.plain_tok_s), kPlain, "plain", 0);
  line(tok, is_finite(c.mtp_tok_s), kMtp, "MTP", 1);
  svg += tok.svg;

  Panel tpot = axes(kMargin + kPanelW + kMargin + 20, "time per output token", "TPOT ms",
                    nice_max(max_of(c.plain_tpot_ms, c.mtp_tpot_ms)), xs);
  line(tpot, is_finite(c.plain_tpot_ms), kPlain, "plain", 0);
  line(tpot, is_finite(c.mtp_tpot_ms), kMtp, "MTP", 1);
  svg += tpot.svg;

  // Per-position acceptance: one group of bars per concurrency, one bar per draft position.
  Panel acc = axes(kMargin + 2 * (kPanelW + kMargin + 20), "acceptance per draft position",
                   "accepted share", 1.0, xs, /*bars=*/true);
  const size_t n = c.accept_per_position.size();
  for (size_t i = 0; i < n; ++i) {
    const std::vector<double>& a = c.accept_per_position[i];
    const double group = kPanelW / static_cast<double>(std::max<size_t>(n, 1));
    const double bw = group * 0.8 / static_cast<double>(std::max<size_t>(a.size(), 1));
    const double gx = acc.px(i, n) - group * 0.4;
    for (size_t j = 0; j < a.size(); ++j) {
      const double v = std::isfinite(a[j]) ? std::clamp(a[j], 0.0, 1.0) : 0;
      const double shade =
          0.35 + 0.65 * (1.0 - static_cast<double>(j) / std::max<size_t>(a.size(), 1));
      acc.svg += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\" "
          "fill-opacity=\"{:.2f}\"><title>{} position {}: {:.3f}</title></rect>\n",
          gx + bw * static_cast<double>(j), acc.py(v), std::max(bw - 1, 1.0),
          acc.y0 + kPanelH - acc.py(v), kMtp, shade, concurrency_label(c.concurrency.at(i)), j + 1,
          v);
    }
  }
  svg += acc.svg;
  svg += "</svg>\n";
  return svg;
}

}  // namespace tandem::bench
