#include "core/wire/route_header.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/wire/server_timing.hpp"

namespace vlessbench {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::optional<double> parse_double(std::string_view s) {
  s = trim(s);
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
  if (s.empty()) return std::nullopt;
  // strtod needs a terminated string; the values are short.
  const std::string text(s);
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return std::nullopt;
  return v;
}

}  // namespace

std::string_view to_string(route_kind r) {
  switch (r) {
    case route_kind::direct: return "direct";
    case route_kind::vless: return "vless";
    case route_kind::unknown: break;
  }
  return "unknown";
}

std::string format_route_header(const route_info* session) {
  if (session == nullptr) return "direct";
  std::string out = "vless session=" + std::to_string(session->session_id);
  if (session->sub != 0) out += " sub=" + std::to_string(session->sub);
  out += " user=" + session->user;
  if (!session->transport.empty() && session->transport != "tls") out += " transport=" + session->transport;
  return out;
}

route_label parse_route_header(std::string_view value) {
  route_label label;
  value = trim(value);
  if (value == "direct") {
    label.kind = route_kind::direct;
    return label;
  }
  if (value.substr(0, 5) != "vless" || (value.size() > 5 && value[5] != ' ')) return label;
  label.kind = route_kind::vless;
  std::string_view rest = value.substr(5);
  while (!rest.empty()) {
    rest = trim(rest);
    const auto sp = rest.find(' ');
    const std::string_view item = rest.substr(0, sp);
    rest = sp == std::string_view::npos ? std::string_view{} : rest.substr(sp + 1);
    const auto eq = item.find('=');
    if (eq == std::string_view::npos) continue;
    const auto key = item.substr(0, eq);
    const auto val = item.substr(eq + 1);
    if (key == "session") {
      std::uint64_t id = 0;
      const auto [p, ec] = std::from_chars(val.data(), val.data() + val.size(), id);
      if (ec == std::errc{} && p == val.data() + val.size()) label.session = id;
    } else if (key == "sub") {
      std::uint32_t n = 0;
      const auto [p, ec] = std::from_chars(val.data(), val.data() + val.size(), n);
      if (ec == std::errc{} && p == val.data() + val.size() && n != 0) label.sub = n;
    } else if (key == "user") {
      label.user = std::string(val);
    } else if (key == "transport" && !val.empty()) {
      label.transport = std::string(val);
    }
  }
  return label;
}

namespace {
constexpr std::string_view banner_prefix = "VLESSBENCH-BANNER ";

parse_result<banner_line> refuse(std::string_view reason) {
  parse_result<banner_line> r;
  r.status = parse_status::invalid;
  r.reason = reason;
  return r;
}
}  // namespace

std::string format_banner_line(std::string_view listener, const route_info* session) {
  std::string out(banner_prefix);
  out.append(listener).append(" ").append(format_route_header(session)).append("\r\n");
  if (out.size() > max_banner_line) {  // a long user name: the route's user is cut, the session kept
    out.resize(max_banner_line - 2);
    out.append("\r\n");
  }
  return out;
}

parse_result<banner_line> parse_banner_line(std::string_view bytes) {
  const std::string_view want = banner_prefix.substr(0, std::min(bytes.size(), banner_prefix.size()));
  if (bytes.substr(0, want.size()) != want) return refuse("not a vlessbench banner");
  const auto lf = bytes.find('\n');
  if (lf == std::string_view::npos) {
    if (bytes.size() >= max_banner_line) return refuse("banner line too long");
    return {};
  }
  if (lf < banner_prefix.size()) return refuse("banner line cut short");
  if (lf + 1 > max_banner_line) return refuse("banner line too long");
  std::string_view line = bytes.substr(banner_prefix.size(), lf - banner_prefix.size());
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  for (const char c : line)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return refuse("control byte in banner line");
  const auto sp = line.find(' ');
  if (sp == 0 || sp == std::string_view::npos) return refuse("banner line names no listener and route");
  parse_result<banner_line> r;
  r.value.listener = std::string(line.substr(0, sp));
  r.value.route = parse_route_header(line.substr(sp + 1));
  r.status = parse_status::complete;
  r.consumed = lf + 1;
  return r;
}

namespace {

// An XHTTP session's request arrivals (ms on its clock) and its connection's reuse.
void add_xhttp(std::string& out, const xhttp_phases& x) {
  if (!x.any()) return;
  auto item = [&](const char* name, const char* param, const std::string& value) {
    out.append(out.empty() ? "" : ", ").append(name).append(param).append(value);
  };
  auto ms = [](std::int64_t us) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(us) / 1000.0);
    return std::string(buf);
  };
  if (x.get >= 0) item("xget", ";dur=", ms(x.get));
  if (x.first_post >= 0) item("xpost", ";dur=", ms(x.first_post));
  if (x.post_gaps >= 0) item("xgaps", ";desc=", std::to_string(x.post_gaps.get()));
  if (x.post_gap_median >= 0) item("xgap", ";dur=", ms(x.post_gap_median));
  if (x.post_gap_max >= 0) item("xgapmax", ";dur=", ms(x.post_gap_max));
  if (x.reused >= 0) item("xreuse", ";desc=", x.reused > 0 ? "1" : "0");
}

}  // namespace

bool wait_is_post_spacing(double wait_from, double wait, std::optional<double> first_post,
                          std::optional<double> gap_max) {
  if (!first_post || !gap_max || *gap_max < stall_threshold_ms) return false;
  const double after_first_post = wait_from + wait - std::max(*first_post, wait_from);
  return after_first_post >= stall_threshold_ms;
}

std::string format_server_timing(const session_phases& p, std::string_view quickack, std::string_view ja4,
                                 std::uint64_t generation) {
  std::string out;
  auto add = [&](const char* name, std::int64_t from, std::int64_t to) {
    if (from < 0 || to < 0) return;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%s;dur=%.3f", out.empty() ? "" : ", ", name,
                  static_cast<double>(to - from) / 1000.0);
    out += buf;
  };
  // tls_done 0: the connection's handshake was done before this session's clock started (a gRPC
  // stream on a connection made earlier): the session timed no TLS phase of its own, so none is
  // named (a "tls;dur=0.000" would read as a handshake of no time).
  if (p.tls_done > 0) add("tls", 0, p.tls_done);
  add("upgrade", p.tls_done >= 0 ? p.tls_done : 0, p.upgrade_done);
  add("vless", p.upgrade_done >= 0 ? p.upgrade_done : p.tls_done, p.header_complete);
  add("resolve", p.dial_from(), p.resolved);
  add("upstream", p.resolved >= 0 ? p.resolved : p.dial_from(), p.upstream_connected);
  if (!quickack.empty()) {
    out += out.empty() ? "ack;desc=" : ", ack;desc=";
    out += quickack;
  }
  if (!ja4.empty()) {
    out += out.empty() ? "ja4;desc=\"" : ", ja4;desc=\"";
    out += ja4;
    out += '"';
  }
  if (generation > 0) out += (out.empty() ? "gen;desc=" : ", gen;desc=") + std::to_string(generation);
  add_xhttp(out, p.xhttp);
  return out;
}

namespace {

bool is_phase(std::string_view name) {
  return name == "tls" || name == "upgrade" || name == "vless" || name == "resolve" || name == "upstream" ||
         name == "xget" || name == "xpost" || name == "xgap" || name == "xgapmax";
}

// Calls each(name, dur, dur_text, desc) for every metric of a Server-Timing value.
template <class Each>
void for_each_metric(std::string_view value, Each each) {
  while (!value.empty()) {
    const auto comma = value.find(',');
    const std::string_view metric = trim(value.substr(0, comma));
    value = comma == std::string_view::npos ? std::string_view{} : value.substr(comma + 1);
    const auto semi = metric.find(';');
    const std::string_view name = trim(metric.substr(0, semi));
    std::optional<double> dur;
    std::string_view dur_text;
    std::optional<std::string_view> desc;
    std::string_view params = semi == std::string_view::npos ? std::string_view{} : metric.substr(semi + 1);
    while (!params.empty()) {
      const auto s2 = params.find(';');
      const std::string_view param = trim(params.substr(0, s2));
      params = s2 == std::string_view::npos ? std::string_view{} : params.substr(s2 + 1);
      const auto eq = param.find('=');
      if (eq == std::string_view::npos) continue;
      const auto key = trim(param.substr(0, eq));
      if (key == "dur") {
        dur_text = trim(param.substr(eq + 1));
        dur = parse_double(dur_text);
      } else if (key == "desc") {
        auto d = trim(param.substr(eq + 1));
        if (d.size() >= 2 && d.front() == '"' && d.back() == '"') d = d.substr(1, d.size() - 2);
        desc = d;
      }
    }
    each(name, dur, dur_text, desc);
  }
}

bool sound_duration(double ms) { return std::isfinite(ms) && ms >= 0; }

}  // namespace

server_phases_ms parse_server_timing(std::string_view value) {
  server_phases_ms t;
  for_each_metric(value, [&](std::string_view name, std::optional<double> dur, std::string_view,
                             std::optional<std::string_view> desc) {
    if (name == "ack" && desc) t.ack = std::string(*desc);
    if (name == "ja4" && desc) t.ja4 = std::string(*desc);
    if (name == "gen" && desc) {
      std::uint64_t g = 0;
      const auto [end, ec] = std::from_chars(desc->data(), desc->data() + desc->size(), g);
      if (ec == std::errc{} && end == desc->data() + desc->size() && g > 0) t.generation = g;
    }
    if (name == "xgaps" && desc) {
      std::uint64_t n = 0;
      const auto [end, ec] = std::from_chars(desc->data(), desc->data() + desc->size(), n);
      if (ec == std::errc{} && end == desc->data() + desc->size()) t.xgaps = n;
    }
    if (name == "xreuse" && desc && (*desc == "0" || *desc == "1")) t.xreuse = *desc == "1";
    if (!dur || !sound_duration(*dur)) return;  // refused_server_timing says why
    if (name == "tls")
      t.tls = dur;
    else if (name == "upgrade")
      t.upgrade = dur;
    else if (name == "vless")
      t.vless = dur;
    else if (name == "resolve")
      t.resolve = dur;
    else if (name == "upstream")
      t.upstream = dur;
    else if (name == "xget")
      t.xget = dur;
    else if (name == "xpost")
      t.xpost = dur;
    else if (name == "xgap")
      t.xgap = dur;
    else if (name == "xgapmax")
      t.xgapmax = dur;
  });
  return t;
}

std::optional<std::string> refused_server_timing(std::string_view value) {
  std::optional<std::string> why;
  for_each_metric(value, [&](std::string_view name, std::optional<double> dur, std::string_view dur_text,
                             std::optional<std::string_view>) {
    if (why || !dur || !is_phase(name) || sound_duration(*dur)) return;
    // The text as sent, cut short: it ends up in an error column and a terminal.
    why = std::string(name) + ";dur=" + std::string(dur_text.substr(0, 24)) + " is not a finite duration >= 0";
  });
  return why;
}

namespace {
constexpr std::string_view udp_marker = "\nVLESSBENCH-UDP ";
constexpr std::string_view udp_short_marker = "\nVLESSBENCH-UDP-SHORT need=";

std::string udp_trailer(std::string_view listener, const route_info* session) {
  std::string trailer(udp_marker);
  trailer.append(listener).append(" ").append(format_route_header(session));
  return trailer;
}
}  // namespace

std::size_t udp_echo_trailer_size(std::string_view listener, const route_info* session) {
  return udp_trailer(listener, session).size();
}

udp_echo_answer format_udp_echo(std::string_view datagram, std::string_view listener, const route_info* session) {
  udp_echo_answer a;
  const std::size_t n = std::min(datagram.size(), max_udp_echo);
  std::string tail = udp_trailer(listener, session);
  if (tail.size() <= n) {
    a.form = udp_echo_form::full;
  } else if (session != nullptr) {
    a.form = udp_echo_form::full;
    a.bytes.reserve(n + tail.size());
    a.bytes.append(datagram.substr(0, n)).append(tail);
    return a;
  } else {
    tail = std::string(udp_short_marker) + std::to_string(tail.size());
    if (tail.size() > n) return a;  // too short even to say why: no answer
    a.form = udp_echo_form::short_form;
  }
  a.bytes.reserve(n);
  a.bytes.append(datagram.substr(0, n - tail.size())).append(tail);
  return a;
}

parse_result<udp_echo> parse_udp_echo(std::string_view echo) {
  parse_result<udp_echo> r;
  r.status = parse_status::invalid;
  // The daemon's trailer ends the answer: the last marker of either form is it (the datagram's
  // head may hold either).
  const auto at = echo.rfind(udp_marker);
  const auto sh = echo.rfind(udp_short_marker);
  if (at == std::string_view::npos || (sh != std::string_view::npos && sh > at)) {
    if (sh != std::string_view::npos) {
      const std::string_view digits = echo.substr(sh + udp_short_marker.size());
      std::size_t need = 0;
      const auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), need);
      if (ec == std::errc{} && p == digits.data() + digits.size() && need > 0) {
        r.value.payload = echo.substr(0, sh);
        r.value.needed = need;
        r.reason = "short echo: the datagram was too short for the route trailer";
        return r;
      }
    }
    r.reason = "no vlessbench UDP trailer";
    return r;
  }
  const std::string_view trailer = echo.substr(at + udp_marker.size());
  const auto sp = trailer.find(' ');
  if (sp == 0 || sp == std::string_view::npos) {
    r.reason = "no vlessbench UDP trailer";
    return r;
  }
  r.value.payload = echo.substr(0, at);
  r.value.listener = std::string(trailer.substr(0, sp));
  r.value.route = parse_route_header(trailer.substr(sp + 1));
  if (r.value.route.kind == route_kind::unknown) {
    r.reason = "unknown route in the UDP trailer";
    return r;
  }
  r.status = parse_status::complete;
  r.consumed = echo.size();
  return r;
}

}  // namespace vlessbench
