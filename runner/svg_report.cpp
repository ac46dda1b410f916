#include "runner/svg_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string_view>

#include "core/wire/markup.hpp"
#include "core/wire/quantile.hpp"

namespace vlessbench::runner {

namespace {

// Colour-blind-safe palette (Okabe-Ito), then repeats with dashes.
constexpr const char* palette[] = {"#000000", "#E69F00", "#0072B2", "#009E73",
                                   "#D55E00", "#CC79A7", "#56B4E9", "#F0E442"};
constexpr int palette_size = 8;

// SVG text and attribute values.
std::string esc(std::string_view s) { return html_escape(s); }

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

void draw_title(std::string& svg, const panel& p, const std::string& title, const std::string& note) {
  svg += "<text x=\"" + num(p.x + p.w / 2) + "\" y=\"" + num(p.y - 28) +
         "\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">" + esc(title) + "</text>\n";
  svg += "<text x=\"" + num(p.x + p.w / 2) + "\" y=\"" + num(p.y - 10) +
         "\" text-anchor=\"middle\" font-size=\"11\" fill=\"#555\" class=\"caption\">" + esc(note) + "</text>\n";
  svg += "<rect x=\"" + num(p.x) + "\" y=\"" + num(p.y) + "\" width=\"" + num(p.w) + "\" height=\"" + num(p.h) +
         "\" fill=\"none\" stroke=\"#888\"/>\n";
}

std::string stroke(std::size_t i) {
  const int c = static_cast<int>(i % palette_size);
  return " stroke=\"" + std::string(palette[c]) + "\"" + (i >= palette_size ? " stroke-dasharray=\"6 3\"" : "");
}

// One CDF per series (sorted, ms) on a log x axis; threshold_ms > 0 draws that value as a red line.
void draw_cdf(std::string& svg, const panel& p, const std::vector<const std::vector<double>*>& series,
              const std::vector<std::string>& names, const std::string& x_label, const char* css_class,
              double threshold_ms = 0, const char* empty_text = "no successful samples") {
  double lo = INFINITY, hi = 0;
  for (const auto* v : series) {
    if (v->empty()) continue;
    lo = std::min(lo, v->front());
    hi = std::max(hi, v->back());
  }
  if (threshold_ms > 0 && hi > 0) {
    lo = std::min(lo, threshold_ms);
    hi = std::max(hi, threshold_ms);
  }
  // y axis: share of samples
  for (int pct = 0; pct <= 100; pct += 25) {
    const double yy = p.y + p.h - p.h * pct / 100.0;
    svg += "<line x1=\"" + num(p.x) + "\" y1=\"" + num(yy) + "\" x2=\"" + num(p.x + p.w) + "\" y2=\"" + num(yy) +
           "\" stroke=\"#ddd\"" + (pct == 50 ? " stroke-dasharray=\"4 3\"" : "") + "/>\n";
    svg += "<text x=\"" + num(p.x - 6) + "\" y=\"" + num(yy + 4) + "\" text-anchor=\"end\" font-size=\"11\">" +
           std::to_string(pct) + "%</text>\n";
  }
  svg += "<text transform=\"translate(" + num(p.x - 44) + "," + num(p.y + p.h / 2) +
         ") rotate(-90)\" text-anchor=\"middle\" font-size=\"12\">share of samples &#8804; x</text>\n";
  svg += "<text x=\"" + num(p.x + p.w / 2) + "\" y=\"" + num(p.y + p.h + 36) +
         "\" text-anchor=\"middle\" font-size=\"12\">" + esc(x_label) + "</text>\n";
  if (hi <= 0) {
    svg += "<text x=\"" + num(p.x + p.w / 2) + "\" y=\"" + num(p.y + p.h / 2) +
           "\" text-anchor=\"middle\" font-size=\"13\" fill=\"#a00\">" + esc(empty_text) + "</text>\n";
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
    svg += "<line x1=\"" + num(xx) + "\" y1=\"" + num(p.y) + "\" x2=\"" + num(xx) + "\" y2=\"" + num(p.y + p.h) +
           "\" stroke=\"" + (decade ? "#ccc" : "#eee") + "\"/>\n";
    svg += "<text x=\"" + num(xx) + "\" y=\"" + num(p.y + p.h + 16) + "\" text-anchor=\"middle\" font-size=\"11\">" +
           tick_label(t) + "</text>\n";
  }
  if (threshold_ms > 0) {
    const double xx = xpos(threshold_ms);
    svg += "<line class=\"threshold\" x1=\"" + num(xx) + "\" y1=\"" + num(p.y) + "\" x2=\"" + num(xx) + "\" y2=\"" +
           num(p.y + p.h) + "\" stroke=\"#c00\" stroke-width=\"1.5\" stroke-dasharray=\"5 3\"/>\n";
    svg += "<text x=\"" + num(xx - 4) + "\" y=\"" + num(p.y + 14) +
           "\" text-anchor=\"end\" font-size=\"11\" fill=\"#c00\">stall threshold " + tick_label(threshold_ms) +
           " ms</text>\n";
  }
  for (std::size_t i = 0; i < series.size(); ++i) {
    const auto& v = *series[i];
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
    svg += "<polyline class=\"" + std::string(css_class) + "\" fill=\"none\" stroke-width=\"2\"" + stroke(i) +
           " points=\"" + pts + "\"><title>" + esc(names[i]) + "</title></polyline>\n";
  }
}

// More paths than colours (`clients --links` with every node): one row per path instead of one
// curve each, its name beside it: a bar from the 5th to the 95th percentile and the median as a
// dot, on the same log axis. Sorted values in, ms.
void draw_rows(std::string& svg, const panel& p, const std::vector<const std::vector<double>*>& series,
               const std::vector<std::string>& names, const std::string& x_label, double threshold_ms = 0) {
  double lo = INFINITY, hi = 0;
  for (const auto* v : series)
    if (!v->empty()) lo = std::min(lo, v->front()), hi = std::max(hi, v->back());
  if (threshold_ms > 0 && hi > 0) lo = std::min(lo, threshold_ms), hi = std::max(hi, threshold_ms);
  svg += "<text x=\"" + num(p.x + p.w / 2) + "\" y=\"" + num(p.y + p.h + 36) +
         "\" text-anchor=\"middle\" font-size=\"12\">" + esc(x_label) +
         "; bar: 5th-95th percentile, dot: median</text>\n";
  if (hi <= 0) {
    svg += "<text x=\"" + num(p.x + p.w / 2) + "\" y=\"" + num(p.y + p.h / 2) +
           "\" text-anchor=\"middle\" font-size=\"13\" fill=\"#a00\">no successful samples</text>\n";
    return;
  }
  lo = std::max(lo, 1e-3);
  const double dlo = std::floor(std::log10(lo));
  double dhi = std::ceil(std::log10(hi));
  if (dhi <= dlo) dhi = dlo + 1;
  const auto xpos = [&](double ms) { return p.x + p.w * (std::log10(std::max(ms, 1e-3)) - dlo) / (dhi - dlo); };
  for (double t : log_ticks(std::pow(10.0, dlo), std::pow(10.0, dhi))) {
    svg += "<line x1=\"" + num(xpos(t)) + "\" y1=\"" + num(p.y) + "\" x2=\"" + num(xpos(t)) + "\" y2=\"" +
           num(p.y + p.h) + "\" stroke=\"#e4e4e4\"/>\n";
    svg += "<text x=\"" + num(xpos(t)) + "\" y=\"" + num(p.y + p.h + 16) +
           "\" text-anchor=\"middle\" font-size=\"11\">" + tick_label(t) + "</text>\n";
  }
  if (threshold_ms > 0)
    svg += "<line class=\"threshold\" x1=\"" + num(xpos(threshold_ms)) + "\" y1=\"" + num(p.y) + "\" x2=\"" +
           num(xpos(threshold_ms)) + "\" y2=\"" + num(p.y + p.h) +
           "\" stroke=\"#c00\" stroke-width=\"1.5\" stroke-dasharray=\"5 3\"/>\n";
  const double row = p.h / static_cast<double>(series.size());
  for (std::size_t i = 0; i < series.size(); ++i) {
    const double yy = p.y + row * (static_cast<double>(i) + 0.5);
    if (i % 2 == 1)
      svg += "<rect x=\"" + num(p.x) + "\" y=\"" + num(yy - row / 2) + "\" width=\"" + num(p.w) + "\" height=\"" +
             num(row) + "\" fill=\"#000\" fill-opacity=\"0.04\"/>\n";
    svg += "<text x=\"" + num(p.x - 6) + "\" y=\"" + num(yy + 4) + "\" text-anchor=\"end\" font-size=\"11\">" +
           esc(names[i]) + "</text>\n";
    const auto& v = *series[i];
    if (v.empty()) continue;
    const double p5 = stats::sorted_quantile(v, 0.05), p95 = stats::sorted_quantile(v, 0.95);
    const double med = stats::sorted_quantile(v, 0.5);
    const bool over = threshold_ms > 0 && med >= threshold_ms;
    svg += "<line class=\"row\" x1=\"" + num(xpos(p5), 2) + "\" y1=\"" + num(yy) + "\" x2=\"" + num(xpos(p95), 2) +
           "\" y2=\"" + num(yy) + "\" stroke=\"" + (over ? "#c00" : "#0072B2") + "\" stroke-width=\"4\"/>\n";
    svg += "<circle cx=\"" + num(xpos(med), 2) + "\" cy=\"" + num(yy) + "\" r=\"4\" fill=\"#000\"><title>" +
           esc(names[i] + ": median " + num(med, 3) + " ms, p5 " + num(p5, 3) + ", p95 " + num(p95, 3)) +
           "</title></circle>\n";
  }
}

void draw_latency_panel(std::string& svg, const panel& p, const std::string& title, const std::string& note,
                        const std::vector<path_result>& results, bool fresh) {
  draw_title(svg, p, title, note);
  std::vector<const std::vector<double>*> series;
  std::vector<std::string> names;
  for (const auto& r : results) {
    series.push_back(&(fresh ? r.fresh : r.reuse).sorted_ms);
    names.push_back(r.name);
  }
  const bool attempted = std::any_of(results.begin(), results.end(), [fresh](const path_result& r) {
    return (fresh ? r.fresh : r.reuse).attempted > 0;
  });
  if (results.size() > palette_size) return draw_rows(svg, p, series, names, "latency, ms (log scale)");
  draw_cdf(svg, p, series, names, "latency, ms (log scale)", "latency", 0,
           attempted ? "no successful samples" : "no samples taken");
}

// Bulk runs: every sample's MB/s as a dot on its path's row, the median as a bar, linear axis from 0.
void draw_throughput_panel(std::string& svg, const panel& p, const std::string& title, const std::string& note,
                           const std::vector<path_result>& results, bool fresh) {
  draw_title(svg, p, title, note);
  double hi = 0;
  for (const auto& r : results) {
    const auto& v = (fresh ? r.fresh : r.reuse).sorted_mbps;
    if (!v.empty()) hi = std::max(hi, v.back());
  }
  svg += "<text x=\"" + num(p.x + p.w / 2) + "\" y=\"" + num(p.y + p.h + 36) +
         "\" text-anchor=\"middle\" font-size=\"12\">throughput, MB/s (10^6 bytes/s)</text>\n";
  if (hi <= 0) {
    svg += "<text x=\"" + num(p.x + p.w / 2) + "\" y=\"" + num(p.y + p.h / 2) +
           "\" text-anchor=\"middle\" font-size=\"13\" fill=\"#a00\">no successful samples</text>\n";
    return;
  }
  // A 1-2-5 step giving 4 to 10 ticks.
  double step = std::pow(10.0, std::floor(std::log10(hi)));
  for (double m : {0.1, 0.2, 0.5, 1.0}) {
    if (hi / (step * m) <= 10) {
      step *= m;
      break;
    }
  }
  const double top = std::ceil(hi / step) * step;
  const auto xpos = [&](double v) { return p.x + p.w * v / top; };
  for (double t = 0; t <= top * (1 + 1e-9); t += step) {
    svg += "<line x1=\"" + num(xpos(t)) + "\" y1=\"" + num(p.y) + "\" x2=\"" + num(xpos(t)) + "\" y2=\"" +
           num(p.y + p.h) + "\" stroke=\"#eee\"/>\n";
    svg += "<text x=\"" + num(xpos(t)) + "\" y=\"" + num(p.y + p.h + 16) +
           "\" text-anchor=\"middle\" font-size=\"11\">" + tick_label(t) + "</text>\n";
  }
  const double row = p.h / static_cast<double>(results.size() + 1);
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& m = fresh ? results[i].fresh : results[i].reuse;
    const double yy = p.y + row * static_cast<double>(i + 1);
    svg += "<text x=\"" + num(p.x - 6) + "\" y=\"" + num(yy + 4) + "\" text-anchor=\"end\" font-size=\"11\">" +
           esc(results[i].name) + "</text>\n";
    const int c = static_cast<int>(i % palette_size);
    for (double v : m.sorted_mbps)
      svg += "<circle cx=\"" + num(xpos(v), 2) + "\" cy=\"" + num(yy) + "\" r=\"4\" fill=\"" + palette[c] +
             "\" fill-opacity=\"0.6\"><title>" + esc(results[i].name + " " + num(v, 1) + " MB/s") +
             "</title></circle>\n";
    if (m.mbps)
      svg += "<line x1=\"" + num(xpos(m.mbps->median)) + "\" y1=\"" + num(yy - 9) + "\" x2=\"" +
             num(xpos(m.mbps->median)) + "\" y2=\"" + num(yy + 9) + "\" stroke-width=\"3\"" + stroke(i) + "/>\n";
  }
}

// What one sample of each target kind timed, for the captions: the same words as docs/runner.md.
struct captions {
  std::string fresh, reuse, title;
};

captions captions_for(const run_metadata& meta) {
  const std::string_view t = meta.target;
  if (meta.bulk_bytes > 0) {
    const std::uint64_t b = meta.bulk_bytes;
    const std::string size = b % (1ull << 30) == 0 ? std::to_string(b >> 30) + " GiB (" + std::to_string(b) + " bytes)"
                             : b % (1ull << 20) == 0
                                 ? std::to_string(b >> 20) + " MiB (" + std::to_string(b) + " bytes)"
                                 : std::to_string(b) + " bytes";
    return {"connect + path setup + GET /bytes/N (down) or POST /sink (up), " + size,
            "the same transfer of " + size + " on a tunnel kept open",
            "vlessbench: bulk throughput per path, " + size + " per sample"};
  }
  if (t.starts_with("https://"))
    return {"connect + proxy/VLESS setup + TLS handshake with the target + one GET, until the body is read",
            "one GET inside the TLS session kept open", "vlessbench: latency CDF per path"};
  if (t.starts_with("banner://"))
    return {"connect + proxy/TLS/VLESS setup, until the first byte of the server's banner",
            "one line written and echoed back on the open connection", "vlessbench: latency CDF per path"};
  if (t.starts_with("udp://"))
    return {"a new flow (socket, UDP ASSOCIATE or VLESS session) + one datagram and its echo",
            "one datagram and its echo on the open flow", "vlessbench: latency CDF per path"};
  if (t.starts_with("dns://"))
    return {"a new flow (socket, UDP ASSOCIATE or VLESS session) + one A query and its answer",
            "one A query and its answer on the open flow", "vlessbench: latency CDF per path"};
  return {"connect + proxy/TLS/VLESS setup + one GET, until the body is read", "one GET on a tunnel kept open",
          "vlessbench: latency CDF per path"};
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

namespace {

// One line per path under the plots: its kind, client options, medians and paired deltas. With a
// row per path (rows) the plots name each path themselves: no colour swatch.
void draw_legend(std::string& svg, const std::vector<path_result>& results, double legend_top, bool bulk, bool datagram,
                 bool rows) {
  svg += "<text x=\"20\" y=\"" + num(legend_top + 10) + "\" font-size=\"13\" font-weight=\"bold\">" +
         std::string(bulk ? "paths (median new / reused, MB/s)"
                          : "paths (median new / reused, ms; paired \u0394 = median per-round difference to the "
                            "baseline)") +
         "</text>\n";
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    const double yy = legend_top + 32 + 20.0 * static_cast<double>(i);
    if (!rows)
      svg += "<line x1=\"24\" y1=\"" + num(yy - 4) + "\" x2=\"54\" y2=\"" + num(yy - 4) + "\" stroke-width=\"3\"" +
             stroke(i) + "/>\n";
    auto med = [bulk](const mode_result& m) {
      if (bulk) return m.mbps ? num(m.mbps->median, 1) : std::string("-");
      return m.latency ? num(m.latency->median, 3) : std::string("-");
    };
    auto delta = [&](const mode_result& m) {
      if (!m.paired_delta_median) return std::string("-");
      char buf[32];
      std::snprintf(buf, sizeof buf, "%+.3f", *m.paired_delta_median);
      return std::string(buf);
    };
    std::string label = r.name + " (" + std::string(to_string(r.kind));
    // The built-in client's TCP options mean nothing to a datagram.
    if (r.kind == path_kind::vless && !datagram)
      label += std::string(", nodelay ") + (r.client.nodelay ? "on" : "off") + ", writes " +
               std::string(to_string(r.client.writes));
    label += "): new " + med(r.fresh) + " / reused " + med(r.reuse);
    if (!bulk) label += r.baseline ? "; baseline" : "; paired \u0394 " + delta(r.fresh) + " / " + delta(r.reuse);
    if (r.stall.verdict == stall_verdict::kind::stall) label += "; STALL on delayed ACK";
    if (r.route_mismatches) label += "; " + std::to_string(r.route_mismatches) + " route mismatches";
    svg += "<text x=\"62\" y=\"" + num(yy) + "\" font-size=\"12\">" + esc(label) + "</text>\n";
  }
}

}  // namespace

std::string render_svg(const run_metadata& meta, const std::vector<path_result>& results) {
  const bool bulk = meta.bulk_bytes > 0;
  const std::string_view t = meta.target;
  const bool datagram = t.starts_with("udp://") || t.starts_with("dns://");
  const bool stall_plot = !bulk && std::any_of(results.begin(), results.end(),
                                               [](const path_result& r) { return !r.stall.vless_sorted_ms.empty(); });
  const captions cap = captions_for(meta);
  const double width = 1200;
  // Past the palette each path is a row of its own (draw_rows): the panels grow with them.
  const bool rows = !bulk && results.size() > palette_size;
  const double panel_h = rows ? std::max(360.0, 16.0 * static_cast<double>(results.size())) : 360;
  const double stall_top = panel_h + 220, stall_h = rows ? panel_h : 200;
  const double legend_top = stall_plot ? stall_top + stall_h + 70 : panel_h + 200;
  const double height = legend_top + 30 + 20.0 * static_cast<double>(results.size()) + 20;
  std::string svg;
  svg += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width, 0) + "\" height=\"" + num(height, 0) +
         "\" viewBox=\"0 0 " + num(width, 0) + " " + num(height, 0) +
         "\" font-family=\"Helvetica, Arial, sans-serif\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  const std::string title = rows ? "vlessbench: latency per path" : cap.title;
  svg += "<text x=\"20\" y=\"30\" font-size=\"18\" font-weight=\"bold\">" + esc(title) + "</text>\n";
  svg += "<text x=\"20\" y=\"52\" font-size=\"12\" fill=\"#333\">" +
         esc("run " + meta.run_id + " · " + meta.time_utc + " · host " + meta.host + " · target " + meta.target +
             " · " + std::to_string(meta.new_count) + " new + " + std::to_string(meta.reuse_count) +
             " reused per path after " + plural(static_cast<std::size_t>(meta.warmup), "warm-up", "warm-ups") +
             ", paths interleaved at random each round") +
         "</text>\n";
  std::string note = bulk   ? "A dot further right is faster; the bar is the median. Each dot is one sample."
                     : rows ? "One row per path (more paths than colours): further left is faster."
                            : "A curve further left is faster; the dashed line is the median. Each step is one sample.";
  if (!meta.interrupted.empty())
    note += " Interrupted by " + meta.interrupted + ": only the samples taken before it.";
  else if (!meta.aborted.empty())
    note += " Aborted early: " + meta.aborted + ".";
  svg += "<text x=\"20\" y=\"70\" font-size=\"12\" fill=\"" + std::string(meta.interrupted.empty() ? "#333" : "#a00") +
         "\">" + esc(note) + "</text>\n";
  if (!meta.interrupted.empty())
    svg += "<text x=\"1180\" y=\"30\" text-anchor=\"end\" font-size=\"14\" font-weight=\"bold\" fill=\"#a00\">" +
           esc("interrupted by " + meta.interrupted) + "</text>\n";
  const panel left = rows ? panel{200, 130, 380, panel_h} : panel{90, 130, 470, 360};
  const panel right = rows ? panel{800, 130, 380, panel_h} : panel{700, 130, 470, 360};
  if (bulk) {
    draw_throughput_panel(svg, {150, 130, 410, 360}, "New connection", cap.fresh, results, true);
    draw_throughput_panel(svg, {760, 130, 410, 360}, "Reused connection", cap.reuse, results, false);
  } else {
    draw_latency_panel(svg, left, "New connection", cap.fresh, results, true);
    draw_latency_panel(svg, right, "Reused connection", cap.reuse, results, false);
  }
  if (stall_plot) {
    const panel sp = rows ? panel{200, stall_top, 980, stall_h} : panel{90, stall_top, 1080, stall_h};
    draw_title(svg, sp, "Server phase: TLS done -> VLESS header complete (new connections)",
               "the daemon's Server-Timing vless phase; at or past the red line a sample counts as stalled "
               "(Nagle meeting delayed ACK)");
    std::vector<const std::vector<double>*> series;
    std::vector<std::string> names;
    for (const auto& r : results) {
      series.push_back(&r.stall.vless_sorted_ms);
      names.push_back(r.name);
    }
    if (rows)
      draw_rows(svg, sp, series, names, "VLESS header wait, ms (log scale)", stall_threshold_ms);
    else
      draw_cdf(svg, sp, series, names, "VLESS header wait, ms (log scale)", "stall", stall_threshold_ms);
  }

  draw_legend(svg, results, legend_top, bulk, datagram, rows);
  svg += "</svg>\n";
  return svg;
}

}  // namespace vlessbench::runner
