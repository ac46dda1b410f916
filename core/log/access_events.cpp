#include "core/log/access_events.hpp"

#include "core/log/access_log.hpp"

// The config's default for [log] queue_bytes is the access log's own.
static_assert(vlessbench::log_config::default_queue_bytes == vlessbench::access_log::default_queue_bytes);

namespace vlessbench {

namespace {
void add_if(json_line& line, std::string_view key, std::string_view value) {
  if (!value.empty()) line.add(key, value);
}
void add_if(json_line& line, std::string_view key, const std::optional<double>& value) {
  if (value) line.add(key, *value);
}
// What a target saw of a connection's route: "direct", or "vless" with the relaying session.
void add_route(json_line& line, const route_info* route) {
  line.add("route", route ? "vless" : "direct");
  if (!route) return;
  line.add("vless_session", route->session_id);
  if (route->sub != 0) line.add("vless_sub", static_cast<std::uint64_t>(route->sub));
  line.add("vless_user", route->user).add("vless_client", route->client).add("vless_listener", route->listener);
}
// An XHTTP session's request arrivals (µs on its clock, from its first request) and packet-up's
// POST gaps; spacing: its header wait was the POST spacing, not a stall.
void add_xhttp(json_line& line, const xhttp_phases& x, bool spacing) {
  line.begin_object("xhttp");
  if (x.get >= 0) line.add("get_us", x.get.get());
  if (x.first_post >= 0) line.add("first_post_us", x.first_post.get());
  if (x.post_gaps >= 0) {
    line.add("post_gaps", x.post_gaps.get());
    if (x.post_gap_median >= 0) line.add("post_gap_median_us", x.post_gap_median.get());
    if (x.post_gap_max >= 0) line.add("post_gap_max_us", x.post_gap_max.get());
    line.add("spacing_wait", spacing);
  }
  line.end_object();
}
}  // namespace

std::string format_event(const vless_reject_event& e) {
  json_line line("vless.reject");
  if (e.session) line.add("session", *e.session);
  line.add("listener", e.listener)
      .add("client", e.client)
      .add("reason", e.reason)
      .add("phase", e.phase)
      .add("bytes_seen", e.bytes_seen);
  add_if(line, "ja4", e.ja4);
  if (!e.groups.empty()) line.add_names("groups", e.groups);
  if (!e.key_shares.empty()) line.add_names("key_shares", e.key_shares);
  add_if(line, "detail", e.detail);
  add_if(line, "user", e.user);
  add_if(line, "dest", e.dest);
  if (e.duration_us) line.add("duration_us", *e.duration_us);
  if (e.fallback) {
    line.add("fallback_us", e.fallback->duration_us)
        .add("fallback_bytes_up", e.fallback->bytes_up)
        .add("fallback_bytes_down", e.fallback->bytes_down)
        .add("fallback_end", e.fallback->end);
  }
  return line.finish();
}

std::string format_event(const vless_session_event& e) {
  const session_phases& p = *e.phases;
  json_line line("vless.session");
  line.add("session", e.session)
      .add("listener", e.listener)
      .add("user", e.user)
      .add("client", e.client)
      .add("dest", e.dest)
      .add("cmd", e.cmd)
      .add("tls_version", e.tls_version)
      .add("cipher", e.cipher)
      .add("sni", e.sni)
      .add("alpn", e.alpn)
      .add("ja4", e.ja4);
  if (!e.groups.empty()) line.add_names("groups", e.groups);
  if (!e.key_shares.empty()) line.add_names("key_shares", e.key_shares);
  if (!e.transport.empty() && e.transport != "tls") line.add("transport", e.transport).add("early_data", e.early_data);
  if (e.reused) line.add("reused", *e.reused);
  if (p.xhttp.any()) add_xhttp(line, p.xhttp, e.post_spacing);
  if (!e.emulate.empty()) line.add("emulate", e.emulate);
  line.begin_object("policy")
      .add("nodelay", e.policy.nodelay)
      .add("quickack", to_string(e.policy.quickack))
      .add("upstream_nodelay", e.upstream_policy.nodelay)
      .add("upstream_quickack", to_string(e.upstream_policy.quickack))
      .add("generation", e.generation)
      .end_object();
  line.begin_object("phases_us").add("tls_done", p.tls_done.get());
  if (p.upgrade_done >= 0) line.add("upgrade_done", p.upgrade_done.get());
  line.add("first_vless_byte", p.first_vless_byte.get()).add("header_complete", p.header_complete.get());
  if (p.resolved >= 0) line.add("resolved", p.resolved.get());
  line.add("upstream_connected", p.upstream_connected.get())
      .add("first_upstream_byte", p.first_upstream_byte.get())
      .add("first_client_byte", p.first_client_byte.get())
      .add("closed", p.closed.get())
      .end_object();
  line.add("stall_suspected", e.stall_suspected);
  if (e.tcp_info) {
    line.begin_object("tcp_info")
        .add("rtt_us", e.tcp_info->rtt_us)
        .add("rttvar_us", e.tcp_info->rttvar_us)
        .add("ato_us", e.tcp_info->ato_us)
        .add("retransmits", e.tcp_info->retransmits)
        .add("unacked", e.tcp_info->unacked)
        .add("delivery_rate", e.tcp_info->delivery_rate)
        .end_object();
  }
  line.add("bytes_up", e.bytes_up).add("bytes_down", e.bytes_down);
  if (e.packets_up) line.add("packets_up", *e.packets_up);
  if (e.packets_down) line.add("packets_down", *e.packets_down);
  if (e.subs) line.add("subs", *e.subs);
  if (e.subs_refused) line.add("subs_refused", *e.subs_refused);
  add_if(line, "mux_error", e.mux_error);
  add_if(line, "flow", e.flow);
  if (e.vision) {
    const vision_facts& v = *e.vision;
    line.begin_object("vision");
    if (v.direct_up_us >= 0) line.add("direct_up_us", v.direct_up_us);
    if (v.direct_down_us >= 0) line.add("direct_down_us", v.direct_down_us);
    line.add("padding_up", v.padding_up).add("padding_down", v.padding_down).add("frames_up", v.frames_up);
    line.add("inner", v.inner);
    add_if(line, "error", v.error);
    line.end_object();
  }
  add_if(line, "sing_mux", e.sing_mux);
  line.add("duration_us", p.closed.get()).add("close_reason", e.close_reason);
  return line.finish();
}

std::string format_event(const vless_sub_event& e) {
  json_line line("vless.sub");
  line.add("session", e.session)
      .add("sub", static_cast<std::uint64_t>(e.sub))
      .add("mux_id", static_cast<std::uint64_t>(e.mux_id))
      .add("listener", e.listener)
      .add("user", e.user);
  add_if(line, "net", e.net);
  add_if(line, "dest", e.dest);
  if (e.xudp) line.add("xudp", true);
  line.add("bytes_up", e.bytes_up).add("bytes_down", e.bytes_down);
  if (e.packets_up) line.add("packets_up", *e.packets_up);
  if (e.packets_down) line.add("packets_down", *e.packets_down);
  if (e.packets_dropped) line.add("packets_dropped", *e.packets_dropped);
  if (e.connect_us) line.add("connect_us", *e.connect_us);
  line.add("duration_us", e.duration_us).add("close_reason", e.close_reason);
  add_if(line, "error", e.error);
  add_if(line, "detail", e.detail);
  return line.finish();
}

std::string format_event(const xhttp_connection_event& e) {
  json_line line("xhttp.connection");
  line.add("session", e.session).add("listener", e.listener).add("client", e.client).add("http", e.http);
  if (e.posts) line.add("posts", *e.posts);
  return line.finish();
}

std::string format_event(const config_reload_event& e) {
  json_line line("config.reload");
  line.add("ok", e.ok).add("generation", e.generation);
  if (!e.ok) line.add("error", e.error);
  if (e.changes) line.add("changes", *e.changes);
  return line.finish();
}

std::string format_event(const http_request_event& e) {
  json_line line("http.request");
  line.add("listener", e.listener).add("peer", e.peer);
  add_route(line, e.route);
  add_if(line, "ja4", e.ja4);
  add_if(line, "method", e.method);
  add_if(line, "path", e.path);
  line.add("status", e.status);
  if (e.bytes) line.add("bytes", *e.bytes);
  if (e.bytes_in) line.add("bytes_in", e.bytes_in);
  if (e.duration_us) line.add("duration_us", *e.duration_us);
  add_if(line, "error", e.error);
  add_if(line, "run", e.run);
  add_if(line, "seq", e.seq);
  add_if(line, "path_label", e.path_label);
  return line.finish();
}

std::string format_event(const target_reject_event& e) {
  json_line line("target.reject");
  line.add("listener", e.listener).add("peer", e.peer).add("reason", e.reason).add("bytes_seen", e.bytes_seen);
  add_if(line, "ja4", e.ja4);
  add_if(line, "detail", e.detail);
  if (e.duration_us) line.add("duration_us", *e.duration_us);
  return line.finish();
}

std::string format_event(const banner_connection_event& e) {
  json_line line("banner.connection");
  line.add("listener", e.listener).add("peer", e.peer);
  add_route(line, e.route);
  line.add("bytes_in", e.bytes_in).add("bytes_out", e.bytes_out);
  if (e.banner_us) line.add("banner_us", *e.banner_us);
  line.add("duration_us", e.duration_us).add("close_reason", e.close_reason);
  return line.finish();
}

std::string format_event(const udp_packet_event& e) {
  json_line line("udp.packet");
  line.add("listener", e.listener).add("peer", e.peer);
  add_route(line, e.route);
  line.add("packets_in", e.packets_in)
      .add("bytes_in", e.bytes_in)
      .add("packets_out", e.packets_out)
      .add("bytes_out", e.bytes_out);
  if (e.short_answers != 0) line.add("short_answers", e.short_answers);
  if (e.unanswered != 0) line.add("unanswered", e.unanswered);
  line.add("duration_us", e.duration_us).add("close_reason", e.close_reason);
  return line.finish();
}

std::string format_event(const udp_refused_event& e) {
  json_line line("udp.refused");
  line.add("listener", e.listener).add("reason", e.reason).add("datagrams", e.datagrams).add("last_peer", e.last_peer);
  return line.finish();
}

std::string format_event(const dns_query_event& e) {
  json_line line("dns.query");
  line.add("listener", e.listener).add("peer", e.peer).add("transport", e.transport);
  add_route(line, e.route);
  add_if(line, "name", e.name);
  if (e.qtype != 0) line.add("qtype", static_cast<std::uint64_t>(e.qtype));
  line.add("rcode", e.rcode);
  if (e.delay_ms != 0) line.add("delay_ms", static_cast<std::uint64_t>(e.delay_ms));
  add_if(line, "error", e.error);
  return line.finish();
}

std::string format_event(const dns_rrl_event& e) {
  json_line line("dns.rrl");
  line.add("listener", e.listener)
      .add("period_ms", e.period_ms)
      .add("answered", e.answered)
      .add("slipped", e.slipped)
      .add("dropped", e.dropped)
      .add("prefixes", e.prefixes)
      .add("last_prefix", e.last_prefix);
  return line.finish();
}

std::string format_event(const probe_run_event& e) {
  const probe_result& r = *e.result;
  const probe_summary& sum = *e.summary;
  json_line line("probe.run");
  line.add("listener", e.listener).add("peer", e.peer).add("route", e.route ? "vless" : "direct");
  if (e.route) line.add("vless_session", e.route->session_id);
  add_if(line, "user_agent", e.user_agent);
  line.add("run", r.run)
      .add("new", r.new_count)
      .add("reuse", r.reuse_count)
      .add("samples", static_cast<std::uint64_t>(r.samples.size()))
      .add("ok", static_cast<std::uint64_t>(sum.ok))
      .add("failed", static_cast<std::uint64_t>(sum.failed))
      .add("vless_samples", static_cast<std::uint64_t>(sum.vless_samples))
      .add("direct_samples", static_cast<std::uint64_t>(sum.direct_samples));
  add_if(line, "new_median_ms", sum.new_median_ms);
  add_if(line, "new_p95_ms", sum.new_p95_ms);
  add_if(line, "reuse_median_ms", sum.reuse_median_ms);
  add_if(line, "reuse_p95_ms", sum.reuse_p95_ms);
  line.add("samples_verified", static_cast<std::uint64_t>(sum.verified));
  line.add("stall_samples", static_cast<std::uint64_t>(sum.stall_samples))
      .add("verdict", sum.verdict)
      .add("page_verdict", r.verdict);
  line.begin_array("per_sample");
  for (const probe_sample& s : r.samples) {
    line.begin_element().add("seq", s.seq).add("path", s.path).add("mode", s.mode).add("ok", s.ok);
    add_if(line, "ms", s.ms);
    line.add("route", s.route);
    if (s.session) line.add("session", *s.session);
    add_if(line, "tls", s.tls);
    add_if(line, "vless", s.vless);
    add_if(line, "upstream", s.upstream);
    if (s.route == "vless") line.add("stall", s.verified && probe_sample_stalled(s));
    line.add("verified", s.verified);
    line.end_object();
  }
  line.end_array();
  return line.finish();
}

}  // namespace vlessbench
