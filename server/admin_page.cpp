#include "server/admin_page.hpp"

#include <openssl/base64.h>
#include <openssl/sha.h>

#include <array>
#include <string>

namespace vlessbench::admin {
namespace {

constexpr std::string_view style = R"CSS(
body{font-family:system-ui,-apple-system,sans-serif;margin:0;padding:12px;color:#222;background:#fafafa}
h1{font-size:1.3em;margin:0 0 4px}
h2{font-size:1.05em;margin:16px 0 4px}
.meta{color:#555;font-size:.85em}
table{border-collapse:collapse;font-size:.8em;background:#fff}
td,th{border-bottom:1px solid #ddd;padding:2px 6px;text-align:left;white-space:nowrap;max-width:28em;overflow:hidden;text-overflow:ellipsis}
td.num,th.num{text-align:right}
tr.stall td{background:#fde2e2}
.flag{color:#b00;font-weight:bold}
.ok{color:#060}
.bad{color:#b00}
.hists{display:flex;flex-wrap:wrap;gap:14px}
.hist{background:#fff;border:1px solid #ddd;padding:4px 6px}
.hist .t{font-size:.8em;margin-bottom:2px}
.bars{display:flex;align-items:flex-end;height:60px;gap:1px;border-bottom:1px solid #999}
.bars div{width:18px;background:#2a6fdb;min-height:0}
.bars div.hot{background:#d33}
.axis{display:flex;gap:1px;font-size:.55em;color:#666}
.axis span{width:18px;overflow:hidden}
#err{color:#b00}
)CSS";

constexpr std::string_view script = R"JS(
"use strict";
const token = new URLSearchParams(location.search).get("token");
const api = "/api/state" + (token ? "?token=" + encodeURIComponent(token) : "");
function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}
function ms(v) { return v === null || v === undefined ? "" : v.toFixed(2); }
function when(t) { return new Date(t).toLocaleTimeString(); }
function table(id, headers, rows) {
  const t = document.getElementById(id);
  t.replaceChildren();
  const hr = el("tr");
  for (const h of headers) hr.appendChild(el("th", h));
  t.appendChild(hr);
  for (const r of rows) {
    const tr = el("tr", null, r.cls);
    for (const c of r.cells) tr.appendChild(typeof c === "object" && c !== null ? c : el("td", c));
    t.appendChild(tr);
  }
}
function histogram(title, h, buckets, threshold) {
  const box = el("div", null, "hist");
  box.appendChild(el("div", title + " (n=" + h.count + (h.count ? ", mean " + (h.sum_ms / h.count).toFixed(2) + " ms" : "") + ")", "t"));
  const bars = el("div", null, "bars"), axis = el("div", null, "axis");
  const counts = h.buckets.concat([h.count - h.buckets.reduce((a, b) => a + b, 0)]);
  const max = Math.max(1, ...counts);
  counts.forEach((n, i) => {
    const label = i < buckets.length ? String(buckets[i]) : "+";
    const b = el("div", null, i > 0 && buckets[i - 1] >= threshold ? "hot" : "");
    b.style.height = Math.round(60 * n / max) + "px";
    b.title = "\u2264 " + label + " ms: " + n;
    bars.appendChild(b);
    axis.appendChild(el("span", label));
  });
  box.appendChild(bars);
  box.appendChild(axis);
  return box;
}
function render(s) {
  document.getElementById("meta").textContent = "vlessbenchd " + s.version + " \u00b7 config generation " + s.generation +
    " \u00b7 open sessions " + s.open_sessions + " \u00b7 open connections " + s.open_connections +
    " \u00b7 stall threshold " + s.stall_threshold_ms + " ms \u00b7 updated " + when(s.now_unix_ms);
  table("listeners", ["kind", "name", "listen", "transport", "policy", "upstream policy", "sessions", "stalls", "bytes up", "bytes down"],
    s.listeners.map(l => ({cls: l.stalls ? "stall" : "", cells: [l.kind, l.name, l.listen, l.transport, l.policy,
      l.upstream_policy, l.sessions ?? 0, l.stalls ?? 0, l.bytes_up ?? 0, l.bytes_down ?? 0]})));
  const rejects = [];
  for (const l of s.listeners) for (const [reason, n] of Object.entries(l.rejects || {})) rejects.push({cells: [l.name, reason, n]});
  table("rejects", ["listener", "reason", "count"], rejects);
  table("sessions", ["closed", "id", "listener", "client", "user", "transport", "TLS", "ALPN", "SNI", "ja4", "dest",
    "TLS ms", "VLESS header ms", "upstream ms", "stall", "close reason", "up", "down"],
    s.sessions.slice().reverse().map(r => ({cls: r.stall ? "stall" : "", cells: [when(r.closed_unix_ms), r.id, r.listener,
      r.client, r.user, r.transport, r.tls_version, r.alpn, r.sni, r.ja4 || "", r.dest, ms(r.tls_ms), ms(r.vless_header_ms),
      ms(r.upstream_connect_ms), r.stall ? el("td", "STALL", "flag") : "", r.close_reason, r.bytes_up, r.bytes_down]})));
  table("reloads", ["time", "generation", "result", "changes", "error"],
    s.reloads.slice().reverse().map(r => ({cells: [when(r.unix_ms), r.generation, r.ok ? el("td", "ok", "ok") : el("td", "failed", "bad"),
      r.changes ?? "", r.error]})));
  table("probes", ["time", "listener", "peer", "user agent", "run", "verdict", "ok", "failed", "vless", "direct", "stalled",
    "new median ms", "reuse median ms"],
    s.probes.slice().reverse().map(p => ({cls: p.verdict === "stall" ? "stall" : "", cells: [when(p.unix_ms), p.listener, p.peer,
      p.user_agent, p.run, p.verdict, p.ok, p.failed, p.vless_samples, p.direct_samples, p.stall_samples,
      ms(p.new_median_ms), ms(p.reuse_median_ms)]})));
  const hists = document.getElementById("hists");
  hists.replaceChildren();
  for (const l of s.listeners) {
    if (!l.phases) continue;
    for (const [phase, h] of Object.entries(l.phases))
      hists.appendChild(histogram(l.name + " \u00b7 " + phase, h, s.buckets_ms, phase === "vless_header" ? s.stall_threshold_ms : Infinity));
  }
}
async function poll() {
  try {
    const r = await fetch(api, {cache: "no-store"});
    if (!r.ok) throw new Error("HTTP " + r.status);
    render(await r.json());
    document.getElementById("err").textContent = "";
    document.body.dataset.loaded = "1";
  } catch (e) {
    document.getElementById("err").textContent = "cannot read /api/state: " + e.message;
  }
  setTimeout(poll, 1000);
}
poll();
)JS";

std::string sha256_base64(std::string_view text) {
  std::array<std::uint8_t, SHA256_DIGEST_LENGTH> digest{};
  SHA256(reinterpret_cast<const std::uint8_t*>(text.data()), text.size(), digest.data());
  std::array<std::uint8_t, 64> out{};
  const std::size_t n = EVP_EncodeBlock(out.data(), digest.data(), digest.size());
  return std::string(reinterpret_cast<const char*>(out.data()), n);
}

}  // namespace

std::string_view dashboard_page() {
  static const std::string page = std::string(R"(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>vlessbench dashboard</title>
<style>)") + std::string(style) + R"(</style></head><body>
<h1>vlessbench dashboard</h1>
<div class="meta" id="meta">loading…</div><div id="err"></div>
<h2>Listeners</h2><table id="listeners"></table>
<h2>Phase histograms (ms)</h2><div class="hists" id="hists"></div>
<h2>Recent sessions</h2><table id="sessions"></table>
<h2>Rejects by reason</h2><table id="rejects"></table>
<h2>Probe runs</h2><table id="probes"></table>
<h2>Reloads</h2><table id="reloads"></table>
<script>)" + std::string(script) + "</script>\n</body></html>\n";
  return page;
}

std::string_view dashboard_csp() {
  static const std::string csp = "default-src 'none'; script-src 'sha256-" + sha256_base64(script) +
                                 "'; style-src 'sha256-" + sha256_base64(style) +
                                 "'; connect-src 'self'; base-uri 'none'; form-action 'none'; "
                                 "frame-ancestors 'none'";
  return csp;
}

}  // namespace vlessbench::admin
