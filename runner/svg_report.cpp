#include "runner/svg_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace vlessbench::runner {

namespace {

// Colour-blind-safe palette (Okabe-Ito), then repeats with dashes.
constexpr const char* palette[] = {"#000000", "#E69F00", "#0072B2", "#009E73",
                                   "#D55E00", "#CC79A7", "#56B4E9", "#F0E442"};
constexpr int palette_size = 8;

std::string esc(std::string_view s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string num(double v, int decimals = 1) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string tick_label(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

struct panel {
  double x, y, w, h;  // plot area
};

void draw_panel(std::string& svg, const panel& p, const std::string& title, const std::string& note,
                const std::vector<path_result>& results, bool fresh) {
  svg += "<text x=\"" + num(p.x + p.w / 2) + "\" y=\"" + num(p.y - 28) +
         "\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">" + esc(title) + "</text>\n";
  svg += "<text x=\"" + num(p.x + p.w / 2) + "\" y=\"" + num(p.y - 10) +
         "\" text-anchor=\"middle\" font-size=\"11\" fill=\"#555\">" + esc(note) + "</text>\n";
  svg += "<rect x=\"" + num(p.x) + "\" y=\"" + num(p.y) + "\" width=\"" + num(p.w) + "\" height=\"" +
         num(p.h) + "\" fill=\"none\" stroke=\"#888\"/>\n";

  double lo = INFINITY, hi = 0;
  for (const auto& r : results) {
    const auto& v = (fresh ? r.fresh : r.reuse).sorted_ms;
    if (v.empty()) continue;
    lo = std::min(lo, v.front());
    hi = std::max(hi, v.back());
  }
  // y axis: share of samples
  for (int pct = 0; pct <= 100; pct += 25) {
    const double yy = p.y + p.h - p.h * pct / 100.0;
    svg += "<line x1=\"" + num(p.x) + "\" y1=\"" + num(yy) + "\" x2=\"" + num(p.x + p.w) + "\" y2=\"" +
           num(yy) + "\" stroke=\"#ddd\"" + (pct == 50 ? " stroke-dasharray=\"4 3\"" : "") + "/>\n";
    svg += "<text x=\"" + num(p.x - 6) + "\" y=\"" + num(yy + 4) +
           "\" text-anchor=\"end\" font-size=\"11\">" + std::to_string(pct) + "%</text>\n";
  }
  svg += "<text transform=\"translate(" + num(p.x - 44) + "," + num(p.y + p.h / 2) +
         ") rotate(-90)\" text-anchor=\"middle\" font-size=\"12\">share of samples &#8804; x</text>\n";
  svg += "<text x=\"" + num(p.x + p.w / 2) + "\" y=\"" + num(p.y + p.h + 36) +
         "\" text-anchor=\"middle\" font-size=\"12\">latency, ms (log scale)</text>\n";
  if (hi <= 0) {
    svg += "<text x=\"" + num(p.x + p.w / 2) + "\" y=\"" + num(p.y + p.h / 2) +
           "\" text-anchor=\"middle\" font-size=\"13\" fill=\"#a00\">no successful samples</text>\n";
    return;
  }
  lo = std::max(lo, 1e-3);
  const double dlo = std::floor(std::log10(lo));
  double dhi = std::ceil(std::log10(hi));
  if (dhi <= dlo) dhi = dlo + 1;
  const auto xpos = [&](double ms) {
    const double l = std::log10(std::max(ms, 1e-3));
    return p.x + p.w * (l - dlo) / (dhi - dlo);
  };
  for (double t : log_ticks(std::pow(10.0, dlo), std::pow(10.0, dhi))) {
    const double xx = xpos(t);
    const bool decade = std::abs(std::log10(t) - std::round(std::log10(t))) < 1e-9;
    svg += "<line x1=\"" + num(xx) + "\" y1=\"" + num(p.y) + "\" x2=\"" + num(xx) + "\" y2=\"" +
           num(p.y + p.h) + "\" stroke=\"" + (decade ? "#ccc" : "#eee") + "\"/>\n";
    svg += "<text x=\"" + num(xx) + "\" y=\"" + num(p.y + p.h + 16) +
           "\" text-anchor=\"middle\" font-size=\"11\">" + tick_label(t) + "</text>\n";
  }
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& v = (fresh ? results[i].fresh : results[i].reuse).sorted_ms;
    if (v.empty()) continue;
    std::string pts;
    const double n = static_cast<double>(v.size());
    double prev_y = p.y + p.h;
    for (std::size_t k = 0; k < v.size(); ++k) {
      const double xx = xpos(v[k]);
      const double yy = p.y + p.h - p.h * static_cast<double>(k + 1) / n;
      pts += num(xx, 2) + "," + num(prev_y, 2) + " " + num(xx, 2) + "," + num(yy, 2) + " ";
      prev_y = yy;
    }
    const int c = static_cast<int>(i % palette_size);
    const bool dashed = i >= palette_size;
    svg += "<polyline fill=\"none\" stroke-width=\"2\" stroke=\"" + std::string(palette[c]) + "\"" +
           (dashed ? " stroke-dasharray=\"6 3\"" : "") + " points=\"" + pts + "\"><title>" +
           esc(results[i].name) + "</title></polyline>\n";
  }
}

}  // namespace

std::vector<double> log_ticks(double lo, double hi) {
  std::vector<double> t;
  if (!(lo > 0) || !(hi > lo)) return t;
  const int d0 = static_cast<int>(std::floor(std::log10(lo) + 1e-9));
  const int d1 = static_cast<int>(std::ceil(std::log10(hi) - 1e-9));
  for (int d = d0; d <= d1; ++d)
    for (double m : {1.0, 2.0, 5.0}) {
      const double v = m * std::pow(10.0, d);
      if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) t.push_back(v);
    }
  return t;
}

std::string render_svg(const run_metadata& meta, const std::vector<path_result>& results) {
  const double width = 1200;
  const double legend_top = 560;
  const double height = legend_top + 30 + 20.0 * static_cast<double>(results.size()) + 20;
  std::string svg;
  svg += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width, 0) + "\" height=\"" +
         num(height, 0) + "\" viewBox=\"0 0 " + num(width, 0) + " " + num(height, 0) +
         "\" font-family=\"Helvetica, Arial, sans-serif\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"20\" y=\"30\" font-size=\"18\" font-weight=\"bold\">vlessbench: latency CDF per path" 
         "</text>\n";
  svg += "<text x=\"20\" y=\"52\" font-size=\"12\" fill=\"#333\">" +
         esc("run " + meta.run_id + " · " + meta.time_utc + " · host " + meta.host + " · target " +
             meta.target + " · " + std::to_string(meta.new_count) + " new + " +
             std::to_string(meta.reuse_count) + " reused per path after " +
             std::to_string(meta.warmup) + " warm-ups, paths interleaved at random each round") +
         "</text>\n";
  svg += "<text x=\"20\" y=\"70\" font-size=\"12\" fill=\"#333\">" +
         esc("A curve further left is faster; the dashed line is the median. Each step is one sample.") +
         "</text>\n";
  draw_panel(svg, {90, 130, 470, 360}, "New connection",
             "connect + proxy/TLS/VLESS setup + one GET, until the body is read", results, true);
  draw_panel(svg, {700, 130, 470, 360}, "Reused connection", "one GET on a tunnel kept open",
             results, false);

  svg += "<text x=\"20\" y=\"" + num(legend_top + 10) + "\" font-size=\"13\" font-weight=\"bold\">" +
         "paths (median new / reused, ms; paired \u0394 = median per-round difference to the baseline)</text>\n";
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    const double yy = legend_top + 32 + 20.0 * static_cast<double>(i);
    const int c = static_cast<int>(i % palette_size);
    svg += "<line x1=\"24\" y1=\"" + num(yy - 4) + "\" x2=\"54\" y2=\"" + num(yy - 4) +
           "\" stroke-width=\"3\" stroke=\"" + palette[c] + "\"" +
           (i >= palette_size ? " stroke-dasharray=\"6 3\"" : "") + "/>\n";
    auto med = [](const mode_result& m) {
      return m.latency ? num(m.latency->median, 3) : std::string("-");
    };
    auto delta = [&](const mode_result& m) {
      if (!m.paired_delta_median) return std::string("-");
      char buf[32];
      std::snprintf(buf, sizeof buf, "%+.3f", *m.paired_delta_median);
      return std::string(buf);
    };
    std::string label = r.name + " (" + std::string(to_string(r.kind));
    if (r.kind == path_kind::vless)
      label += std::string(", nodelay ") + (r.client.nodelay ? "on" : "off") + ", writes " +
               std::string(to_string(r.client.writes));
    label += "): new " + med(r.fresh) + " / reused " + med(r.reuse);
    label += r.baseline ? "; baseline" : "; paired \u0394 " + delta(r.fresh) + " / " + delta(r.reuse);
    if (r.stall.verdict == stall_verdict::kind::stall) label += "; STALL on delayed ACK";
    if (r.route_mismatches) label += "; " + std::to_string(r.route_mismatches) + " route mismatches";
    svg += "<text x=\"62\" y=\"" + num(yy) + "\" font-size=\"12\">" + esc(label) + "</text>\n";
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace vlessbench::runner
