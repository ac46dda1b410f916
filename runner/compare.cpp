#include "runner/compare.hpp"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string_view>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace vlessbench::runner {

namespace {

using json = nlohmann::ordered_json;

std::string cell(const json& paths, const std::string& path, const char* mode, const char* key, bool sign) {
  if (!paths.contains(path)) return "-";
  const auto& p = paths[path];
  if (std::string_view(key).starts_with("paired") && p.value("baseline", false)) return "baseline";
  if (!p.contains(mode) || !p[mode].contains(key) || !p[mode][key].is_number()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, sign ? "%+.3f" : "%.3f", p[mode][key].get<double>());
  return buf;
}

std::optional<double> value(const json& paths, const std::string& path, const char* mode, const char* key) {
  if (!paths.contains(path)) return std::nullopt;
  const auto& p = paths[path];
  if (std::string_view(key).starts_with("paired") && p.value("baseline", false)) return std::nullopt;
  if (!p.contains(mode) || !p[mode].contains(key) || !p[mode][key].is_number()) return std::nullopt;
  return p[mode][key].get<double>();
}

std::string stall_cell(const json& paths, const std::string& path) {
  if (!paths.contains(path) || !paths[path].contains("stall")) return "-";
  const auto& s = paths[path]["stall"];
  const std::string verdict = s.value("verdict", "-");
  if (verdict == "no-data") return "no-data";
  return verdict + " " + std::to_string(s.value("stalled", 0)) + "/" + std::to_string(s.value("with_timing", 0));
}

// What the daemon ran for the path's answers: "kernel g1", "on g2"; "-" when it said nothing
// (a direct path, a run from before the daemon sent its generation).
std::string server_cell(const json& paths, const std::string& path) {
  if (!paths.contains(path) || !paths[path].contains("server")) return "-";
  const auto& s = paths[path]["server"];
  auto keys = [](const json& counts, const char* prefix) {
    std::string out;
    if (!counts.is_object()) return out;
    for (const auto& [k, n] : counts.items()) {
      (void)n;
      out += (out.empty() ? prefix : std::string("+") + prefix) + k;
    }
    return out;
  };
  const std::string ack = keys(s.value("ack", json::object()), ""),
                    gen = keys(s.value("generation", json::object()), "g");
  return ack.empty() && gen.empty() ? "-" : ack + (ack.empty() || gen.empty() ? "" : " ") + gen;
}

std::string pad(const std::string& s, std::size_t w, bool right) {
  if (s.size() >= w) return s;
  return right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
}

}  // namespace

std::string format_comparison(const std::vector<std::pair<std::string, std::string>>& runs) {
  std::vector<json> summaries;
  std::vector<std::string> names;  // union of path names, first appearance first
  std::string out;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    auto j = json::parse(runs[i].second, nullptr, false);
    if (j.is_discarded() || !j.contains("paths") || !j.contains("run"))
      throw std::runtime_error(runs[i].first + ": not a vlessbench summary.json");
    const auto& run = j["run"];
    out += "[" + std::to_string(i + 1) + "] " + runs[i].first + ": run " + run.value("id", "?") + ", " +
           run.value("time_utc", "?") + ", target " + run.value("target", "?") + "\n";
    for (const auto& [name, p] : j["paths"].items()) {
      (void)p;
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
    summaries.push_back(std::move(j));
  }
  std::size_t name_w = 4;
  for (const auto& n : names) name_w = std::max(name_w, n.size());
  const std::size_t col_w = 16;
  std::string head = pad("path", name_w, false) + "  " + pad("metric (ms)", 18, false);
  for (std::size_t i = 0; i < runs.size(); ++i) head += pad("[" + std::to_string(i + 1) + "]", col_w, true);
  // Each later run against the first: [2]-[1], [3]-[1], ...
  for (std::size_t i = 1; i < runs.size(); ++i) head += pad("[" + std::to_string(i + 1) + "]-[1]", col_w, true);
  out += "\n" + head + "\n";
  struct metric {
    const char* label;
    const char* mode;
    const char* key;
    bool sign;
  };
  const metric metrics[] = {{"new median", "new", "median_ms", false},
                            {"new p95", "new", "p95_ms", false},
                            {"new paired d", "new", "paired_delta_median_ms", true},
                            {"reuse median", "reuse", "median_ms", false},
                            {"reuse p95", "reuse", "p95_ms", false},
                            {"reuse paired d", "reuse", "paired_delta_median_ms", true}};
  for (const auto& name : names) {
    bool first = true;
    for (const auto& m : metrics) {
      std::string line = pad(first ? name : "", name_w, false) + "  " + pad(m.label, 18, false);
      for (const auto& s : summaries) line += pad(cell(s["paths"], name, m.mode, m.key, m.sign), col_w, true);
      const auto base = value(summaries.front()["paths"], name, m.mode, m.key);
      for (std::size_t i = 1; i < summaries.size(); ++i) {
        const auto v = value(summaries[i]["paths"], name, m.mode, m.key);
        char buf[32] = "-";
        if (base && v) std::snprintf(buf, sizeof buf, "%+.3f", *v - *base);
        line += pad(buf, col_w, true);
      }
      out += line + "\n";
      first = false;
    }
    std::string line = pad("", name_w, false) + "  " + pad("stall", 18, false);
    for (const auto& s : summaries) line += pad(stall_cell(s["paths"], name), col_w, true);
    out += line + "\n";
    // The server's ACK policy and config generation each run met: a reload between runs shows.
    line = pad("", name_w, false) + "  " + pad("server ack, gen", 18, false);
    for (const auto& s : summaries) line += pad(server_cell(s["paths"], name), col_w, true);
    if (line.find_first_not_of(" -", name_w + 20) != std::string::npos) out += line + "\n";
  }
  return out;
}

}  // namespace vlessbench::runner
