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
.box{max-width:100%;overflow-x:auto}
.box.tall{max-height:70vh;overflow-y:auto}
td,th{border-bottom:1px solid #ddd;padding:2px 5px;text-align:left;white-space:nowrap;max-width:28em;overflow:hidden;text-overflow:ellipsis}
#sessions{font-size:.72em}
#sessions td,#sessions th{padding:2px 4px;max-width:8em}
#probes td:nth-child(4){max-width:12em}
#probes td:nth-child(5){max-width:9em}
#listeners td{white-space:normal;min-width:3em;max-width:14em}
#sessions th{position:sticky;top:0;background:#fff}
td.num,th.num{text-align:right}
tr.stall td{background:#fde2e2}
.flag{color:#b00;font-weight:bold}
.ok{color:#060}
.bad{color:#b00}
.hists{display:flex;flex-wrap:wrap;gap:14px}
.hist{background:#fff;border:1px solid #ddd;padding:4px 6px}
.hist .t{font-size:.8em;margin-bottom:2px}
.bars{display:flex;align-items:flex-end;height:60px;gap:1px;border-bottom:1px solid #999}
.bars div{width:20px;background:#2a6fdb;min-height:0}
.bars div.hot{background:#d33}
.axis{display:flex;gap:1px;font-size:9px;color:#666}
.axis span{width:20px;overflow:hidden;text-align:center;white-space:nowrap}
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
function when(t) { return new Date(t).toLocaleTimeString([], {hour12: false}); }
function table(id, headers, rows) {
  const t = document.getElementById(id);
  t.replaceChildren();
  const hr = el("tr");
  for (const h of headers) hr.appendChild(el("th", h));
  t.appendChild(hr);
  for (const r of rows) {
    const tr = el("tr", null, r.cls);
    for (const c of r.cells) {
      if (typeof c === "object" && c !== null) { tr.appendChild(c); continue; }
      const td = el("td", c);
      if (typeof c === "string" && c.length > 16) td.title = c;  // a cut cell's full text on hover
      tr.appendChild(td);
    }
    t.appendChild(tr);
  }
}
// Bucket bounds as short labels that fit a bar's width: ".5" "1" … "250" "1s" "5s", then ">5s".
function bound(v) { return v >= 1000 ? (v / 1000) + "s" : v < 1 ? String(v).replace(/^0/, "") : String(v); }
// The bucket a quantile falls in, from the histogram: "≤ X ms", or "> X ms" past the last bound.
function quantile(h, buckets, q) {
  if (!h.count) return "";
  let seen = 0;
  for (let i = 0; i < buckets.length; i++) {
    seen += h.buckets[i];
    if (seen >= q * h.count) return "≤ " + buckets[i] + " ms";
  }
  return "> " + buckets[buckets.length - 1] + " ms";
}
function histogram(title, h, buckets, threshold) {
  const box = el("div", null, "hist");
  box.appendChild(el("div", title + " (n=" + h.count + (h.count ? ", median " + quantile(h, buckets, 0.5) + ", P95 " +
    quantile(h, buckets, 0.95) + ", mean " + (h.sum_ms / h.count).toFixed(2) + " ms" : "") + ")", "t"));
  const bars = el("div", null, "bars"), axis = el("div", null, "axis");
  const counts = h.buckets.concat([h.count - h.buckets.reduce((a, b) => a + b, 0)]);
  const max = Math.max(1, ...counts);
  let hot = 0;
  counts.forEach((n, i) => {
    const label = i < buckets.length ? bound(buckets[i]) : ">" + bound(buckets[buckets.length - 1]);
    const past = i > 0 && buckets[i - 1] >= threshold;
    if (past) hot += n;
    const b = el("div", null, past ? "hot" : "");
    // A few stalls among hundreds would be a 0-1 px sliver: any count gets a bar one can see.
    b.style.height = (n ? Math.max(4, Math.round(60 * n / max)) : 0) + "px";
    b.title = (i < buckets.length ? "≤ " + buckets[i] : "> " + buckets[buckets.length - 1]) + " ms: " + n;
    bars.appendChild(b);
    axis.appendChild(el("span", label));
  });
  if (hot) box.firstChild.appendChild(el("span", " \u00b7 " + hot + " stalled (\u2265 " + threshold + " ms)", "flag"));
  box.appendChild(bars);
  box.appendChild(axis);
  return box;
}
// What the stalls column says: since the last reload that changed the listener's policy, the
// stalls before it apart ("3 before reload at 10:42:07, 0 since").
function stalls(l) {
  const n = l.stalls ?? 0, before = l.stalls_before_policy_change ?? 0;
  if (!l.policy_changed_unix_ms || !before) return {text: String(n), since: n};
  return {text: before + " before reload at " + when(l.policy_changed_unix_ms) + ", " + (n - before) + " since", since: n - before};
}
// An XHTTP session's requests: GET and first POST (ms from its first request), packet-up's POST
// gaps, whether its HTTP/2 connection carried sessions before, whether its header wait was the spacing.
function xhttp(r) {
  if (r.transport !== "xhttp") return "";
  const out = [];
  if (r.xhttp_get_ms != null) out.push("GET " + ms(r.xhttp_get_ms));
  if (r.xhttp_first_post_ms != null) out.push("POST " + ms(r.xhttp_first_post_ms));
  if (r.post_gaps != null) out.push(r.post_gaps + " gaps" + (r.post_gaps ? " (median " + ms(r.post_gap_median_ms) +
    ", max " + ms(r.post_gap_max_ms) + ")" : ""));
  if (r.reused) out.push("reused");
  if (r.post_spacing) out.push("header waited for POST spacing");
  return out.join(" \u00b7 ");
}
// Sessions for a VLESS listener; for a target what it answered, and how many came through VLESS.
function traffic(l) {
  if (l.kind === "vless" && l.transport === "xhttp")  // XMUX's shared connections, packet-up's spacing
    return (l.sessions ?? 0) + " (reused h2 " + (l.xhttp_reused ?? 0) + ", header waits that were POST spacing " +
      (l.spacing_waits ?? 0) + ")";
  if (l.kind === "vless") return String(l.sessions ?? 0);
  return (l.answers ?? 0) + " (vless " + (l.answers_vless ?? 0) + ")";
}
function render(s) {
  document.getElementById("meta").textContent = "vlessbenchd " + s.version + " \u00b7 config generation " + s.generation +
    " \u00b7 open sessions " + s.open_sessions + " \u00b7 open connections " + s.open_connections +
    " \u00b7 stall threshold " + s.stall_threshold_ms + " ms \u00b7 updated " + when(s.now_unix_ms);
  // Name and stalls first: on a phone they are what is on screen before the box scrolls sideways.
  table("listeners", ["name", "stalls", "policy", "sessions / answers", "kind", "listen", "transport", "upstream policy",
    "emulated path", "bytes up", "bytes down"],
    s.listeners.map(l => { const st = stalls(l); return {cls: st.since ? "stall" : "", cells: [l.name, st.text, l.policy,
      traffic(l), l.kind, l.listen, l.transport, l.upstream_policy, l.emulate || "", l.bytes_up ?? 0, l.bytes_down ?? 0]}; }));
  const rejects = [];
  for (const l of s.listeners) for (const [reason, n] of Object.entries(l.rejects || {})) rejects.push({cells: [l.name, reason, n]});
  table("rejects", ["listener", "reason", "count"], rejects);
  document.getElementById("sessions-n").textContent = "(" + s.sessions.length + ", newest first)";
  const cut = (v) => { const td = el("td", v); td.title = v || ""; return td; };  // the whole value on hover
  table("sessions", ["closed", "id", "listener", "client", "user", "transport", "TLS / ALPN", "SNI", "ja4", "dest",
    "TLS ms", "header ms", "upstream ms", "stall", "xhttp", "close", "up", "down"],
    s.sessions.slice().reverse().map(r => ({cls: r.stall ? "stall" : "", cells: [when(r.closed_unix_ms), r.id, r.listener,
      cut(r.client), r.user, r.transport, (r.tls_version || "") + " " + (r.alpn || ""), cut(r.sni), cut(r.ja4 || ""),
      cut(r.dest), ms(r.tls_ms), ms(r.vless_header_ms), ms(r.upstream_connect_ms), r.stall ? el("td", "STALL", "flag") : "",
      cut(xhttp(r)), r.close_reason, r.bytes_up, r.bytes_down]})));
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
    if (l.kind !== "vless" || !l.phases) continue;  // the phases are a VLESS session's
    for (const [phase, h] of Object.entries(l.phases)) {
      if (phase === "xhttp_post_gap" && l.transport !== "xhttp") continue;  // packet-up's POST spacing
      hists.appendChild(histogram(l.name + " \u00b7 " + phase, h, s.buckets_ms, phase === "vless_header" ? s.stall_threshold_ms : Infinity));
    }
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
<h2>Listeners</h2><div class="box"><table id="listeners"></table></div>
<h2>Phase histograms (ms)</h2><div class="hists" id="hists"></div>
<h2>Rejects by reason</h2><div class="box"><table id="rejects"></table></div>
<h2>Probe runs</h2><div class="box"><table id="probes"></table></div>
<h2>Reloads</h2><div class="box"><table id="reloads"></table></div>
<h2>Recent sessions <span class="meta" id="sessions-n"></span></h2><div class="box tall"><table id="sessions"></table></div>
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
