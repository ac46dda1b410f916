#include "target/probe_page.hpp"

#include <cstdio>
#include <string>

#include "core/wire/probe_result.hpp"
#include "core/wire/route_header.hpp"

namespace vlessbench::target {
namespace {

// The page with @STALL_MS@ and @MAX_COUNT@ where the daemon's constants go. Samples are taken as
// the runner takes them (docs/runner.md): warm-up round, then rounds of one sample per path in a
// fresh random order, all new-connection rounds first, then all reused ones. A new-connection
// sample asks for ?close=1, so the target answers Connection: close and the next request needs a
// new TCP connection (through a proxy client: a new VLESS session).
constexpr std::string_view page_template = R"PAGE(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>vlessbench probe</title>
<style>
body{font-family:system-ui,-apple-system,sans-serif;margin:0 auto;padding:12px;max-width:760px;color:#222}
h1{font-size:1.3em;margin:0 0 8px}
button{font-size:1.1em;padding:10px 18px;border-radius:8px;border:1px solid #246;background:#2a6fdb;color:#fff}
button:disabled{background:#999;border-color:#777}
label{margin-right:10px}
input{width:4.5em;font-size:1em}
#verdict{font-size:1.15em;font-weight:bold;padding:10px;border-radius:8px;margin:10px 0;background:#eee}
#verdict[data-verdict=stall]{background:#fdd;color:#900}
#verdict[data-verdict=no_stall]{background:#dfd;color:#060}
table{border-collapse:collapse;width:100%;font-size:.85em}
td,th{border-bottom:1px solid #ddd;padding:3px 4px;text-align:right}
td:first-child,th:first-child{text-align:left}
.stall{color:#900;font-weight:bold}
.hist{display:flex;align-items:flex-end;height:80px;gap:2px;margin:6px 0 0;border-bottom:1px solid #999}
.hist>.bin{flex:1;display:flex;align-items:flex-end;gap:1px;height:100%}
.hist>.bin>div{flex:1;background:#2a6fdb}
.hist>.bin>div.reuse{background:#7bb36b}
.axis{position:relative;height:1.3em;font-size:.75em;color:#444}
.axis span{position:absolute;top:0;transform:translateX(-50%);white-space:nowrap}
.axis span.first{transform:none}
.axis span.last{transform:translateX(-100%)}
.axis span::before{content:'';position:absolute;left:50%;top:-4px;height:4px;border-left:1px solid #999}
.axis span.first::before{left:0}
.axis span.last::before{left:100%}
.small{font-size:.8em;color:#555}
#node{font-weight:bold}
#share textarea{width:100%;box-sizing:border-box;min-height:4em;font:.8em ui-monospace,monospace;resize:vertical}
#share button{font-size:.95em;padding:6px 12px}
.narrow{display:none}
/* A phone: the samples keep seq, mode, ms, route, session and the vless phase (the stall's
   evidence) on screen; path (shown in the mode cell instead), tls and upstream go. */
@media (max-width:600px){.wide{display:none}.narrow{display:inline}table{font-size:.8em}td,th{padding:3px 2px}}
</style></head><body>
<h1>vlessbench browser probe</h1>
<p class="small">Open this page through the client under test (its TUN or proxy mode). New-connection
samples make the target close each connection, so every one needs a new TCP connection and, through
a client, a new VLESS session; reused samples keep one connection. The server's phases come from its
Server-Timing header; a VLESS phase (TLS done &rarr; VLESS header) of @STALL_MS@ ms or more is a
suspected Nagle / delayed-ACK stall.</p>
<div><label>new <input id="n-new" type="number" min="1" max="@MAX_COUNT@" value="20"></label>
<label>reused <input id="n-reuse" type="number" min="1" max="@MAX_COUNT@" value="20"></label>
<button id="start" type="button">Run probe</button></div>
<p id="status" data-state="idle">idle</p>
<div id="verdict" data-verdict="none">no run yet</div>
<p id="node" data-node="">node: no run yet</p>
<p id="reuse-check" data-reused="none"></p>
<table id="stats"><thead><tr><th>path / mode</th><th>n</th><th>median ms</th><th>P95 ms</th>
<th>route</th></tr></thead><tbody></tbody></table>
<div class="hist" id="hist"></div><div class="axis" id="hist-axis"></div>
<p class="small" id="hist-label">target path, request to end of response in ms: new (blue) and reused (green)
samples per bin</p>
<div id="share"><button id="copy" type="button">Copy summary</button> <span id="copy-state" class="small"></span>
<textarea id="summary" readonly aria-label="text summary of the run"></textarea></div>
<table id="samples"><thead><tr><th>seq</th><th class="wide">path</th><th>mode</th><th>ms</th><th>route</th>
<th>session</th><th class="wide">tls</th><th>vless</th><th class="wide">upstream</th></tr></thead><tbody></tbody></table>
<script>
'use strict';
(function () {
  var STALL_MS = @STALL_MS@;
  var MAX_COUNT = @MAX_COUNT@;
  var params = new URLSearchParams(location.search);
  var el = function (id) { return document.getElementById(id); };
  var samples = [];
  var running = false;
  // The run id and results token the daemon issued to this page load (single use); a further run
  // asks /probe/token for the next pair.
  var issued = { run: '@RUN@', token: '@TOKEN@' };

  function clampCount(v, d) {
    var n = parseInt(v, 10);
    if (!(n >= 1)) return d;
    return Math.min(n, MAX_COUNT);
  }
  if (params.has('new')) el('n-new').value = clampCount(params.get('new'), 20);
  if (params.has('reuse')) el('n-reuse').value = clampCount(params.get('reuse'), 20);

  async function nextRun() {
    if (issued) { var first = issued; issued = null; return first; }
    var res = await fetch('/probe/token', { cache: 'no-store' });
    if (!res.ok) throw new Error('token ' + res.status);
    return await res.json();
  }
  function shuffle(a) {
    for (var i = a.length - 1; i > 0; i--) {
      var j = Math.floor(Math.random() * (i + 1));
      var t = a[i]; a[i] = a[j]; a[j] = t;
    }
    return a;
  }
  function quantile(values, q) {
    if (!values.length) return null;
    var s = values.slice().sort(function (a, b) { return a - b; });
    var pos = (s.length - 1) * q, lo = Math.floor(pos), hi = Math.ceil(pos);
    return s[lo] + (s[hi] - s[lo]) * (pos - lo);
  }
  function fmt(v) { return v === null || v === undefined ? '' : v.toFixed(3); }
  // X-Vlessbench-Route: "direct" or "vless session=ID user=NAME".
  function parseRoute(v) {
    if (!v) return { route: 'unknown', session: null };
    if (v === 'direct') return { route: 'direct', session: null };
    var m = /^vless session=(\d+)(?: |$)/.exec(v);
    return m ? { route: 'vless', session: parseInt(m[1], 10) } : { route: 'unknown', session: null };
  }
  // Server-Timing: "tls;dur=1.2, vless;dur=0.05, upstream;dur=0.1, ack;desc=on". The listener's
  // ACK policy (ack;desc) goes to out.ack.
  function parseTiming(v) {
    var out = {};
    if (!v) return out;
    v.split(',').forEach(function (metric) {
      var parts = metric.trim().split(';');
      for (var i = 1; i < parts.length; i++) {
        var kv = parts[i].trim().split('=');
        if (kv[0] === 'dur') { var d = parseFloat(kv[1]); if (isFinite(d)) out[parts[0].trim()] = d; }
        if (kv[0] === 'desc' && parts[0].trim() === 'ack') out.ack = kv[1].replace(/"/g, '');
      }
    });
    return out;
  }
  // The Resource Timing entry's serverTiming, where the header itself is not readable.
  function timingFromEntry(url) {
    var out = {};
    if (!window.performance || !performance.getEntriesByName) return out;
    var list = performance.getEntriesByName(url);
    var e = list.length ? list[list.length - 1] : null;
    if (e && e.serverTiming) e.serverTiming.forEach(function (m) { out[m.name] = m.duration; });
    return out;
  }

  async function sample(run, path, mode, seq, record) {
    var url = path.base + '/generate_204?probe=' + run + '&seq=' + seq + (mode === 'new' ? '&close=1' : '');
    var abs = new URL(url, location.href).href;
    var ctl = window.AbortController ? new AbortController() : null;
    var timer = ctl ? setTimeout(function () { ctl.abort(); }, 10000) : null;
    var s = { seq: seq, path: path.name, mode: mode, ok: false, ms: null, route: 'unknown', session: null,
              tls: null, vless: null, upstream: null, node: null, ack: null };
    try {
      var t0 = performance.now();
      var res = await fetch(abs, { cache: 'no-store', credentials: 'omit', signal: ctl ? ctl.signal : undefined });
      await res.arrayBuffer();
      var t1 = performance.now();
      s.ok = res.status === 204;
      s.ms = t1 - t0;
      var r = parseRoute(res.headers.get('X-Vlessbench-Route'));
      s.route = r.route; s.session = r.session;
      s.node = res.headers.get('X-Vlessbench-Node');
      var t = parseTiming(res.headers.get('Server-Timing'));
      if (t.ack !== undefined) s.ack = t.ack;
      if (t.tls === undefined && t.vless === undefined) t = timingFromEntry(abs);
      if (t.tls !== undefined) s.tls = t.tls;
      if (t.vless !== undefined) s.vless = t.vless;
      if (t.upstream !== undefined) s.upstream = t.upstream;
    } catch (err) {
      s.ok = false;
      s.ms = null;
    }
    if (timer) clearTimeout(timer);
    if (s.ok === false) s.ms = null;
    if (record) { samples.push(s); show(s); }
    return s;
  }

  function stalled(s) { return s.route === 'vless' && s.vless !== null && s.vless >= STALL_MS; }
  function verdictOf() {
    var vless = 0, stalls = 0;
    samples.forEach(function (s) { if (s.ok && s.route === 'vless') vless++; if (s.ok && stalled(s)) stalls++; });
    return { verdict: stalls ? 'stall' : vless ? 'no_stall' : 'no_vless', vless: vless, stalls: stalls };
  }

  function cell(tr, text, cls) {
    var td = document.createElement('td');
    td.textContent = text;
    if (cls) td.className = cls;
    tr.appendChild(td);
  }
  function show(s) {
    var tr = document.createElement('tr');
    tr.className = 'sample route-' + s.route;
    tr.setAttribute('data-route', s.route);
    if (s.session !== null) tr.setAttribute('data-session', String(s.session));
    cell(tr, String(s.seq)); cell(tr, s.path, 'wide'); cell(tr, s.mode);
    if (s.path !== 'target') {
      var tag = document.createElement('span');
      tag.className = 'narrow';
      tag.textContent = ' ' + s.path;
      tr.lastChild.appendChild(tag);
    }
    cell(tr, s.ok ? fmt(s.ms) : 'failed');
    cell(tr, s.route); cell(tr, s.session === null ? '' : String(s.session));
    cell(tr, fmt(s.tls), 'wide'); cell(tr, fmt(s.vless), stalled(s) ? 'stall' : ''); cell(tr, fmt(s.upstream), 'wide');
    el('samples').tBodies[0].appendChild(tr);
    render();
  }
  function render() {
    var groups = {};
    samples.forEach(function (s) {
      var k = s.path + ' / ' + s.mode;
      if (!groups[k]) groups[k] = { ms: [], vless: [], routes: {} };
      if (s.ok) groups[k].ms.push(s.ms);
      if (s.ok && s.vless !== null) groups[k].vless.push(s.vless);
      groups[k].routes[s.route] = true;
    });
    var body = el('stats').tBodies[0];
    while (body.firstChild) body.removeChild(body.firstChild);
    var notReused = reuseCheck();
    Object.keys(groups).forEach(function (k) {
      var tr = document.createElement('tr');
      cell(tr, notReused && /\/ reuse$/.test(k) ? k + ' (not reused: a new session each)' : k);
      cell(tr, String(groups[k].ms.length));
      cell(tr, fmt(quantile(groups[k].ms, 0.5))); cell(tr, fmt(quantile(groups[k].ms, 0.95)));
      cell(tr, Object.keys(groups[k].routes).join(' '));
      body.appendChild(tr);
    });
    var v = verdictOf();
    var box = el('verdict');
    box.setAttribute('data-verdict', v.verdict);
    box.textContent = v.verdict === 'stall'
      ? 'STALL suspected: ' + v.stalls + ' of ' + v.vless + ' VLESS samples waited ' + STALL_MS + ' ms or more for the VLESS header'
      : v.verdict === 'no_stall'
        ? 'no stall: ' + v.vless + ' VLESS samples, none waited ' + STALL_MS + ' ms for the VLESS header'
        : 'no VLESS samples: these requests did not come through a VLESS client (route direct or unknown)';
    nodeLine();
    histogram();
    summary(groups, v);
  }
  // The VLESS listener(s) that carried the samples (X-Vlessbench-Node), with the ACK policy the
  // daemon reported for them.
  function nodeLine() {
    var nodes = {}, order = [];
    samples.forEach(function (s) {
      if (!s.ok || s.route !== 'vless' || !s.node) return;
      if (!nodes[s.node]) { nodes[s.node] = { n: 0, ack: s.ack }; order.push(s.node); }
      nodes[s.node].n++;
    });
    var p = el('node');
    p.setAttribute('data-node', order.join(','));
    if (!order.length) {
      p.textContent = samples.length ? 'node: none (no sample came through a VLESS listener of this daemon)' : 'node: no run yet';
      return;
    }
    p.textContent = (order.length === 1 ? 'node: ' : 'nodes: ') + order.map(function (name) {
      var n = nodes[name];
      return name + ' (VLESS listener' + (n.ack ? ', ACK policy ' + n.ack : '') + '; ' + n.n + ' sample' + (n.n === 1 ? '' : 's') + ')';
    }).join(', ');
  }
  var runInfo = { run: '', at: '', posted: '' };
  // What a phone can paste into a message: the run, the node, the verdict and each group's medians
  // (the numbers of the table above).
  function summary(groups, v) {
    var lines = ['vlessbench probe run ' + (runInfo.run || '?') + ' at ' + location.host + (runInfo.at ? ', ' + runInfo.at : ''),
                 el('node').textContent, 'verdict: ' + el('verdict').textContent];
    Object.keys(groups).forEach(function (k) {
      var g = groups[k];
      lines.push(k + ': n ' + g.ms.length + ', median ' + fmt(quantile(g.ms, 0.5)) + ' ms, P95 ' +
                 fmt(quantile(g.ms, 0.95)) + ' ms' + (g.vless.length ? ', server vless phase median ' +
                 fmt(quantile(g.vless, 0.5)) + ' ms' : '') + ', route ' + Object.keys(g.routes).join(' '));
    });
    if (el('reuse-check').textContent) lines.push(el('reuse-check').textContent);
    if (runInfo.posted) lines.push(runInfo.posted);
    var box = el('summary');
    box.value = lines.join('\n');
    box.style.height = 'auto';  // as tall as its text: all of it in view, in a screenshot too
    box.style.height = (box.scrollHeight + 4) + 'px';
  }
  // Selected first, so a browser without a clipboard for this page still leaves it ready to copy;
  // the Clipboard API only where execCommand did not copy (it needs a secure context, and a page on
  // http://VM:8080 is not one).
  function copySummary() {
    var box = el('summary'), state = el('copy-state');
    box.focus();
    box.select();
    var done = false;
    try { done = document.execCommand('copy'); } catch (err) { done = false; }
    if (done) { state.textContent = 'copied'; return; }
    state.textContent = 'selected: copy it from the menu';
    if (navigator.clipboard && window.isSecureContext)
      navigator.clipboard.writeText(box.value).then(function () { state.textContent = 'copied'; }, function () {});
  }
  // Reused samples are only reused when they share a VLESS session: a client that opens a new
  // one per request (so the "reuse" rows each name a session of their own) reused nothing.
  // Returns true then.
  function reuseCheck() {
    var reuse = samples.filter(function (s) { return s.ok && s.mode === 'reuse' && s.route === 'vless' && s.session !== null; });
    var seen = {};
    reuse.forEach(function (s) { seen[s.session] = true; });
    var distinct = Object.keys(seen).length;
    var p = el('reuse-check');
    if (reuse.length < 2) { p.setAttribute('data-reused', 'none'); p.textContent = ''; return false; }
    var none = distinct === reuse.length;
    p.setAttribute('data-reused', none ? 'no' : 'yes');
    p.textContent = none
      ? 'the client opened a new VLESS session for each request: nothing was reused (' + reuse.length +
        ' "reuse" samples, ' + distinct + ' sessions); their times are new connections, not reused ones'
      : 'reused: ' + reuse.length + ' "reuse" samples over ' + distinct + ' VLESS session' + (distinct === 1 ? '' : 's');
    return none;
  }
  // The smallest of 1, 2, 5 times a power of ten at or above v: an axis of round ticks.
  function niceCeil(v) {
    var p = Math.pow(10, Math.floor(Math.log10(v)));
    var steps = [1, 2, 5, 10];
    for (var i = 0; i < steps.length; i++) if (steps[i] * p >= v) return steps[i] * p;
    return 10 * p;
  }
  function tickText(v) { return String(+v.toFixed(v < 1 ? 2 : v < 10 ? 1 : 0)); }
  // One ms axis for both modes: each bin holds a new and a reused bar, the axis below it ticks
  // 0 … max in fifths.
  function histogram() {
    var target = samples.filter(function (s) { return s.ok && s.path === 'target'; });
    var h = el('hist'), axis = el('hist-axis');
    while (h.firstChild) h.removeChild(h.firstChild);
    while (axis.firstChild) axis.removeChild(axis.firstChild);
    if (!target.length) return;
    var bins = 16, max = niceCeil(Math.max.apply(null, target.map(function (s) { return s.ms; })) || 1);
    var counts = { 'new': new Array(bins).fill(0), reuse: new Array(bins).fill(0) };
    target.forEach(function (s) { counts[s.mode][Math.min(bins - 1, Math.floor(s.ms / max * bins))]++; });
    var top = Math.max.apply(null, counts['new'].concat(counts.reuse)) || 1;
    for (var i = 0; i < bins; i++) {
      var bin = document.createElement('div');
      bin.className = 'bin';
      ['new', 'reuse'].forEach(function (mode) {
        var d = document.createElement('div');
        d.className = mode;
        d.style.height = Math.round(counts[mode][i] / top * 100) + '%';
        d.title = mode + ' ' + tickText(i * max / bins) + '-' + tickText((i + 1) * max / bins) + ' ms: ' + counts[mode][i];
        bin.appendChild(d);
      });
      h.appendChild(bin);
    }
    for (var k = 0; k <= 5; k++) {
      var t = document.createElement('span');
      t.className = 'tick' + (k === 0 ? ' first' : k === 5 ? ' last' : '');
      t.style.left = (k * 20) + '%';
      t.textContent = tickText(k * max / 5) + (k === 5 ? ' ms' : '');
      axis.appendChild(t);
    }
  }

  function setStatus(state, text) {
    var p = el('status');
    p.setAttribute('data-state', state);
    p.textContent = text;
  }

  async function runProbe() {
    if (running) return;
    running = true;
    el('start').disabled = true;
    samples = [];
    var rows = el('samples').tBodies[0];
    while (rows.firstChild) rows.removeChild(rows.firstChild);
    // At once, before the token is asked for: the last run's "posted" must not stand over its
    // emptied table (a reader, or a script polling the state, would take it for this run's).
    setStatus('running', 'asking the daemon for a run id');
    var nNew = clampCount(el('n-new').value, 20), nReuse = clampCount(el('n-reuse').value, 20);
    var ticket;
    try {
      ticket = await nextRun();
    } catch (err) {
      setStatus('post-failed', 'no run token from the daemon; reload the page');
      el('start').disabled = false;
      running = false;
      return;
    }
    var run = ticket.run;
    runInfo = { run: run, at: new Date().toISOString().replace(/\.\d+Z$/, 'Z'), posted: '' };
    var paths = [{ name: 'target', base: '' }];
    var control = params.get('control');
    if (control && /^https?:\/\/[^\/?#]+$/.test(control)) paths.push({ name: 'control', base: control });
    var seq = 0;
    var phases = [['new', nNew], ['reuse', nReuse]];
    for (var p = 0; p < phases.length; p++) {
      var mode = phases[p][0], rounds = phases[p][1];
      setStatus('running', 'run ' + run + ': warm-up (' + mode + ')');
      var warm = shuffle(paths.slice());
      for (var w = 0; w < warm.length; w++) await sample(run, warm[w], mode, ++seq, false);
      for (var r = 0; r < rounds; r++) {
        setStatus('running', 'run ' + run + ': ' + mode + ' round ' + (r + 1) + ' of ' + rounds);
        var order = shuffle(paths.slice());
        for (var i = 0; i < order.length; i++) await sample(run, order[i], mode, ++seq, true);
      }
    }
    render();
    var v = verdictOf();
    // The result schema (core/wire/probe_result.hpp) has no node or ack: the daemon knows both
    // from the sessions a sample names.
    var posted = samples.map(function (x) {
      var o = {};
      Object.keys(x).forEach(function (k) { if (k !== 'node' && k !== 'ack') o[k] = x[k]; });
      return o;
    });
    var doc = { v: 1, run: run, 'new': nNew, reuse: nReuse, verdict: v.verdict, samples: posted };
    try {
      var res = await fetch('/probe/result', { method: 'POST', cache: 'no-store',
        headers: { 'Content-Type': 'text/plain', 'X-Vlessbench-Probe-Token': ticket.token },
        body: JSON.stringify(doc) });
      runInfo.posted = res.ok ? 'the daemon logged it: probe.run run=' + run + ' (its access log, its dashboard\'s Probe runs)'
                              : 'the daemon refused the results: ' + res.status;
      render();
      setStatus(res.ok ? 'posted' : 'post-failed',
        'run ' + run + ' done; results ' + (res.ok ? 'logged by the daemon' : 'refused: ' + res.status));
    } catch (err) {
      setStatus('post-failed', 'run ' + run + ' done; posting the results failed');
    }
    el('start').disabled = false;
    running = false;
  }

  el('start').addEventListener('click', function () { runProbe(); });
  el('copy').addEventListener('click', copySummary);
  if (params.get('auto') === '1') runProbe();
})();
</script>
</body></html>
)PAGE";

std::string replace_all(std::string text, std::string_view what, std::string_view with) {
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + with.size()))
    text.replace(at, what.size(), with);
  return text;
}

}  // namespace

std::string probe_page(std::string_view run, std::string_view token) {
  static const std::string page = [] {
    char ms[32];
    std::snprintf(ms, sizeof ms, "%g", stall_threshold_ms);
    // new and reuse at most a quarter of the parser's sample cap each: both modes on both paths
    // fit.
    const auto max_count = std::to_string(probe_max_samples / 4);
    return replace_all(replace_all(std::string(page_template), "@STALL_MS@", ms), "@MAX_COUNT@", max_count);
  }();
  // run and token are the daemon's own ([a-z0-9], digits '.' hex): nothing to escape.
  return replace_all(replace_all(page, "@RUN@", run), "@TOKEN@", token);
}

}  // namespace vlessbench::target
