// size: one sample of every path kind (direct, tcp, tls, vless, mux, udp, dns, ntp, stun) with its
// route check and phases; each kind's steps are short functions here
#include "runner/measure.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <optional>

#include "core/wire/dns_message.hpp"
#include "core/wire/ntp_message.hpp"
#include "core/wire/server_timing.hpp"
#include "core/wire/stun_message.hpp"
#include "runner/datagram.hpp"
#include "runner/tunnel.hpp"

namespace vlessbench::runner {

namespace {

// A stun:// request's size: room for the answer's XOR-MAPPED-ADDRESS (IPv6) and a SOFTWARE naming
// a route of the length udp_echo_room allows for.
constexpr std::size_t stun_request_room = 20 + 24 + 4 + 236;

// On a terminal a bar with an ETA, redrawn at most every 100 ms; elsewhere (a log, a pipe) one line
// every `every_s` seconds, so a long run in CI or under nohup still shows it is alive.
class progress_bar {
 public:
  progress_bar(bool terminal, int every_s, std::size_t total)
      : terminal_(terminal), every_(every_s), total_(total), start_(std::chrono::steady_clock::now()) {}
  void step(std::string_view what) {
    ++done_;
    if (!terminal_ && every_.count() <= 0) return;
    const auto now = std::chrono::steady_clock::now();
    const auto gap = terminal_ ? std::chrono::milliseconds(100) : std::chrono::milliseconds(every_);
    if ((done_ != total_ || !terminal_) && now - last_ < gap) return;
    if (!terminal_ && last_ == std::chrono::steady_clock::time_point{} && now - start_ < gap) return;
    last_ = now;
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const double eta = done_ > 0 ? elapsed * static_cast<double>(total_ - done_) / static_cast<double>(done_) : 0;
    if (terminal_) {
      const std::size_t width = 30;
      const std::size_t filled = total_ ? done_ * width / total_ : width;
      std::fprintf(stderr, "\r[%s%s] %zu/%zu ETA %s %-24.24s", std::string(filled, '#').c_str(),
                   std::string(width - filled, ' ').c_str(), done_, total_, clock_text(eta).c_str(),
                   std::string(what).c_str());
    } else {
      std::fprintf(stderr, "vlessbench: %zu/%zu samples (%zu%%), %s elapsed, ETA %s, last: %s\n", done_, total_,
                   total_ ? done_ * 100 / total_ : 100, clock_text(elapsed).c_str(), clock_text(eta).c_str(),
                   std::string(what).c_str());
    }
    std::fflush(stderr);
  }
  void finish() {
    if (terminal_) std::fprintf(stderr, "\r%100s\r", "");
  }

 private:
  static std::string clock_text(double seconds) {
    const auto s = std::llround(seconds);
    char buf[32];
    if (s >= 3600)
      std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, s / 60 % 60);
    else if (s >= 60)
      std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
    else
      std::snprintf(buf, sizeof buf, "%llds", s);
    return buf;
  }
  bool terminal_;
  std::chrono::seconds every_;
  std::size_t total_;
  std::size_t done_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_{};
};

std::int64_t elapsed_ns(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count();
}

// Fills the server's view of the sample from the response head; after the clock stopped.
void record_response(sample& s, const exchange_result& r, path_kind kind) {
  std::optional<std::string> refused_timing;
  if (r.head) {
    s.status = r.head->status;
    if (const auto route = r.head->find("X-Vlessbench-Route")) s.route = parse_route_header(*route);
    if (const auto st = r.head->find("Server-Timing")) {
      s.timing = parse_server_timing(*st);
      refused_timing = refused_server_timing(*st);
      // The daemon's word (xreuse): a core's XMUX session rode a connection with earlier ones.
      if (s.timing.xreuse.value_or(false)) s.shared_h2 = true;
    }
    s.route_mismatch = is_route_mismatch(kind, s.route.kind);
  }
  if (r.error) {
    s.ok = false;
    s.error = r.error->reason;
  } else if (refused_timing) {
    s.ok = false;  // a daemon that times its phases as nan or -1 ms proves nothing about them
    s.error = "Server-Timing: " + *refused_timing;
  } else if (s.status / 100 != 2) {
    s.ok = false;
    s.error = "status " + std::to_string(s.status);
  } else {
    s.ok = true;
  }
}

struct state {
  const measure_options& opts;
  asio::io_context& io;
  std::vector<path_plan> plans;
  std::vector<route_label> banner_routes;  // banner:// reuse: the route each path's tunnel proved
  std::vector<sample> samples;
  std::uint64_t seq = 0;
  stats::prng rng;
  progress_bar bar;
  int failed_rounds = 0;  // consecutive rounds in which every sample failed
  std::string aborted;
  measure_end* end = nullptr;
  int signal = 0;  // the first SIGINT/SIGTERM: stop before the next sample
  // Closes the tunnel or flow of the sample in flight, so a signal need not wait for its timeout.
  std::function<void()> cancel;
};

// While alive, a signal closes t (a tunnel or a datagram flow): the sample fails at once and, the
// run being interrupted, is not recorded.
class in_flight {
 public:
  template <class Tunnel>
  in_flight(state& st, const std::shared_ptr<Tunnel>& t) : st_(st) {
    st_.cancel = [weak = std::weak_ptr<Tunnel>(t)] {
      if (const auto p = weak.lock()) p->close();
    };
  }
  ~in_flight() { st_.cancel = nullptr; }
  in_flight(const in_flight&) = delete;
  in_flight& operator=(const in_flight&) = delete;

 private:
  state& st_;
};

// Counts a round; true when the run should stop (see measure_options::abort_after_failed_rounds).
bool give_up(state& st, bool any_ok, const std::string& last_error) {
  st.failed_rounds = any_ok ? 0 : st.failed_rounds + 1;
  const int limit = st.opts.abort_after_failed_rounds;
  if (limit <= 0 || st.failed_rounds < limit) return false;
  st.aborted = "every path failed in " + std::to_string(limit) + " consecutive rounds (last error: " + last_error + ")";
  return true;
}

awaitable<void> pause(state& st) {
  if (st.opts.pause.count() <= 0) co_return;
  asio::steady_timer t(st.io, st.opts.pause);
  co_await t.async_wait(as_tuple_awaitable);
}

// A sample's identity: which round, path and mode, and the next request sequence number.
sample start_sample(state& st, std::size_t p, int round, sample_mode mode) {
  sample s;
  s.round = round;
  s.path = st.plans[p].spec->name;
  s.mode = mode;
  s.seq = ++st.seq;
  return s;
}

// What one sample of path p sends: a GET, or on a bulk path GET /bytes/N or POST /sink + N bytes.
struct request_plan {
  std::string head;
  std::uint64_t upload = 0;
  std::uint64_t bytes = 0;  // bulk: body bytes this sample moves
};

request_plan plan_request(const state& st, std::size_t p, std::uint64_t seq, const std::string& name) {
  const auto& o = st.opts;
  switch (st.plans[p].spec->bulk) {
    case bulk_direction::down: {
      target_url t = o.target;
      t.path = "/bytes/" + std::to_string(o.bulk_bytes);
      return {format_get(t, o.run_id, seq, name), 0, o.bulk_bytes};
    }
    case bulk_direction::up:
      return {format_post_sink(o.target, o.run_id, seq, name, o.bulk_bytes), o.bulk_bytes, o.bulk_bytes};
    case bulk_direction::none: break;
  }
  return {format_get(o.target, o.run_id, seq, name), 0, 0};
}

void record_banner(sample& s, const banner_line& b, const maybe_failure& err, path_kind kind) {
  s.route = b.route;
  s.route_mismatch = is_route_mismatch(kind, s.route.kind);
  s.ok = !err;
  s.error = err ? err->reason : std::string{};
}

// A new tunnel measured from its open. xhttp paths over h2 take their reused samples this way too
// (mode reuse): a new XHTTP session on the path's shared HTTP/2 connection, as Xray's XMUX opens
// a new VLESS connection.
awaitable<sample> new_connection_sample(state& st, std::size_t p, int round,
                                        sample_mode mode = sample_mode::new_connection) {
  const auto& plan = st.plans[p];
  const auto scheme = st.opts.target.scheme;
  sample s = start_sample(st, p, round, mode);
  const request_plan request = plan_request(st, p, s.seq, s.path);
  auto t = std::make_shared<tunnel>(st.io.get_executor(), plan, st.opts.timeout);
  const in_flight guard(st, t);
  t->arm();
  // mux paths, and xhttp h2 paths' reused samples: the shared connection, off the clock
  maybe_failure err = co_await t->prepare(mode == sample_mode::new_connection);
  const auto t0 = std::chrono::steady_clock::now();
  if (!err) err = co_await t->open();
  s.shared_h2 = t->rode_shared_h2();
  if (!err && scheme == target_scheme::https) {
    const auto opened = std::chrono::steady_clock::now();
    err = co_await t->start_tls();
    if (!err) s.inner_tls_ns = elapsed_ns(opened, std::chrono::steady_clock::now());
  }
  if (scheme == target_scheme::banner) {
    banner_line b;
    auto first = std::chrono::steady_clock::now();
    if (!err) err = co_await t->read_banner(b, first);
    const auto t1 = !err ? first : std::chrono::steady_clock::now();
    t->disarm();
    t->close();
    s.ns = elapsed_ns(t0, t1);
    record_banner(s, b, err, plan.spec->kind);
    co_return s;
  }
  exchange_result r;
  if (!err) r = co_await t->exchange(request.head, request.upload);
  const auto t1 = std::chrono::steady_clock::now();
  t->disarm();
  if (!err && !r.error) s.rtt_ms = t->path_rtt_ms();
  t->close();
  if (err) r.error = std::move(err);
  s.ns = elapsed_ns(t0, t1);
  s.bytes = request.bytes;
  record_response(s, r, plan.spec->kind);
  co_return s;
}

// Outside the clock: a tunnel for reused samples, with the target's TLS session (https://) and a
// first exchange (a GET, or the banner) done, so a reused sample measures one exchange, nothing else.
awaitable<maybe_failure> open_reusable(state& st, std::size_t p, const sample& s, std::shared_ptr<tunnel>& t) {
  const auto scheme = st.opts.target.scheme;
  t = std::make_shared<tunnel>(st.io.get_executor(), st.plans[p], st.opts.timeout);
  const in_flight guard(st, t);
  t->arm();
  auto err = co_await t->prepare(false);
  if (!err) err = co_await t->open();
  if (!err && scheme == target_scheme::https) err = co_await t->start_tls();
  if (!err && scheme == target_scheme::banner) {
    banner_line b;
    auto first = std::chrono::steady_clock::now();
    err = co_await t->read_banner(b, first);
    st.banner_routes[p] = b.route;
  } else if (!err) {
    // "Reused" means another request on a tunnel that already carried one: the first request
    // still pays for a VLESS header sent with it, or a proxy that dials upstream lazily.
    const auto first = co_await t->exchange(format_get(st.opts.target, st.opts.run_id, ++st.seq, s.path));
    err = prefixed("first request: ", first.error);
  }
  t->disarm();
  co_return err;
}

awaitable<sample> reuse_sample(state& st, std::size_t p, int round, std::shared_ptr<tunnel>& t) {
  const auto& plan = st.plans[p];
  if (plan.xmux && st.opts.target.scheme != target_scheme::banner)
    co_return co_await new_connection_sample(st, p, round, sample_mode::reuse);
  sample s = start_sample(st, p, round, sample_mode::reuse);
  if (!t || !t->reusable()) {
    if (auto f = co_await open_reusable(st, p, s, t)) {
      t.reset();
      s.ok = false;
      s.error = "open tunnel: " + f->reason;
      co_return s;
    }
  }
  const in_flight guard(st, t);
  if (st.opts.target.scheme == target_scheme::banner) {
    const std::string line = format_echo_line(st.opts.run_id, s.seq, s.path);
    t->arm();
    const auto t0 = std::chrono::steady_clock::now();
    const auto err = co_await t->echo(line);
    const auto t1 = std::chrono::steady_clock::now();
    t->disarm();
    s.ns = elapsed_ns(t0, t1);
    record_banner(s, banner_line{{}, st.banner_routes[p]}, err, plan.spec->kind);
    co_return s;
  }
  const request_plan request = plan_request(st, p, s.seq, s.path);
  t->arm();
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = co_await t->exchange(request.head, request.upload);
  const auto t1 = std::chrono::steady_clock::now();
  t->disarm();
  s.ns = elapsed_ns(t0, t1);
  s.bytes = request.bytes;
  record_response(s, r, plan.spec->kind);
  co_return s;
}

// udp:// and dns:// targets: what one sample sends and how its reply is recognised (built before
// the clock starts).
struct datagram_probe {
  std::string datagram;
  datagram_tunnel::matcher mine;
};

datagram_probe plan_datagram(const state& st, std::uint64_t seq, const std::string& name) {
  if (st.opts.target.scheme == target_scheme::dns) {
    const auto id = static_cast<std::uint16_t>(seq & 0xffff);
    return {dns::build_query(id, st.opts.target.dns_name, dns::type_a), [id](std::string_view reply) {
              const auto r = dns::parse_response(reply);
              return r.complete() && r.value.id == id;
            }};
  }
  if (st.opts.target.scheme == target_scheme::ntp) {
    // The transmit time is the sample's tag: the answer's origin echoes it.
    const auto now =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch());
    const std::uint64_t transmit = ntp::from_unix_ns(static_cast<std::uint64_t>(now.count())) ^ (seq & 0xFFFF);
    return {ntp::format_request(transmit), [transmit](std::string_view reply) {
              const auto r = ntp::parse_packet(reply);
              return r.complete() && r.value.mode == ntp::mode_server && r.value.origin == transmit;
            }};
  }
  if (st.opts.target.scheme == target_scheme::stun) {
    stun::transaction_id id{};
    for (std::size_t i = 0; i < 8; ++i) id[i] = static_cast<std::uint8_t>(seq >> (8 * i));
    const std::uint32_t run_tag = stun::crc32(st.opts.run_id);
    for (std::size_t i = 0; i < 4; ++i) id[8 + i] = static_cast<std::uint8_t>(run_tag >> (8 * i));
    // Padded: a direct source's answer is never longer than its request, and SOFTWARE names the route.
    return {stun::format_request(id, stun_request_room), [id](std::string_view reply) {
              const auto r = stun::parse_response(reply);
              return r.complete() && r.value.id == id;
            }};
  }
  std::string line = format_echo_line(st.opts.run_id, seq, name);
  line.pop_back();  // the echo's trailer starts with its own newline
  // The echo is never longer than the datagram: room for its route trailer after the line.
  std::string datagram = line + std::string(udp_echo_room, '.');
  return {std::move(datagram), [line](std::string_view reply) { return reply.substr(0, line.size()) == line; }};
}

// After the clock: the reply's route proof (the echo's trailer, the DNS answer's route TXT
// record) and whether it is a success.
void record_datagram(sample& s, target_scheme scheme, const std::string& reply, const maybe_failure& err,
                     path_kind kind) {
  s.ok = !err;
  s.error = err ? err->reason : std::string{};
  if (!s.ok) return;
  if (scheme == target_scheme::dns) {
    const auto r = dns::parse_response(reply);  // complete: the matcher accepted it
    for (const auto& txt : r.value.additional_txt)
      if (const auto route = dns::parse_route_txt(txt)) s.route = parse_route_header(route->route);
    if (r.value.truncated) {
      s.ok = false;
      s.error = "dns: truncated answer (TC set): the responder's rate limit ([limits] dns_rrl_*)?";
    } else if (r.value.rc != dns::rcode::noerror) {
      s.ok = false;
      s.error = "dns: rcode " + std::string(dns::to_string(r.value.rc));
    } else if (std::find(r.value.address_types.begin(), r.value.address_types.end(), dns::type_a) ==
               r.value.address_types.end()) {
      s.ok = false;
      s.error = "dns: no A record in the answer";
    }
  } else if (scheme == target_scheme::stun) {
    // SOFTWARE: "<listener> <route>"; absent when the padded request still left no room for it.
    const auto r = stun::parse_response(reply);
    const auto sp = r.value.software.find(' ');
    if (sp != std::string::npos) s.route = parse_route_header(std::string_view(r.value.software).substr(sp + 1));
  } else if (scheme == target_scheme::ntp) {
    // The NTP answer has no room for the route: the target's udp.packet line proves it (verify).
  } else {
    const auto echo = parse_udp_echo(reply);
    if (echo.complete()) {
      s.route = echo.value.route;
    } else if (echo.value.needed > 0) {
      s.ok = false;
      s.error = "udp echo: short answer, its route trailer needs a datagram of " + std::to_string(echo.value.needed) +
                " bytes";
    }
  }
  s.route_mismatch = is_route_mismatch(kind, s.route.kind);
}

awaitable<sample> datagram_new_sample(state& st, std::size_t p, int round) {
  const auto& plan = st.plans[p];
  sample s = start_sample(st, p, round, sample_mode::new_connection);
  const datagram_probe probe = plan_datagram(st, s.seq, s.path);
  std::string reply;
  reply.reserve(1024);
  auto t = std::make_shared<datagram_tunnel>(st.io.get_executor(), plan, st.opts.timeout);
  const in_flight guard(st, t);
  t->arm();
  maybe_failure err = co_await t->prepare(true);  // mux=on: the shared connection, off the clock
  const auto t0 = std::chrono::steady_clock::now();
  if (!err) err = co_await t->open();
  if (!err) err = co_await t->round_trip(probe.datagram, probe.mine, reply);
  const auto t1 = std::chrono::steady_clock::now();
  t->disarm();
  s.flow = t->direct_flow();
  t->close();
  s.ns = elapsed_ns(t0, t1);
  record_datagram(s, st.opts.target.scheme, reply, err, plan.spec->kind);
  co_return s;
}

awaitable<sample> datagram_reuse_sample(state& st, std::size_t p, int round, std::shared_ptr<datagram_tunnel>& t) {
  const auto& plan = st.plans[p];
  sample s = start_sample(st, p, round, sample_mode::reuse);
  std::string reply;
  reply.reserve(1024);
  if (!t || !t->reusable()) {
    // Outside the clock: the flow (and its VLESS session or SOCKS5 association) with one
    // unrecorded first datagram, so a reused sample is one more datagram on a flow in use.
    t = std::make_shared<datagram_tunnel>(st.io.get_executor(), plan, st.opts.timeout);
    t->arm();
    auto err = co_await t->prepare(false);
    if (!err) err = co_await t->open();
    if (!err) {
      const auto first = plan_datagram(st, ++st.seq, s.path);
      err = prefixed("first datagram: ", co_await t->round_trip(first.datagram, first.mine, reply));
    }
    t->disarm();
    if (err) {
      t->close();
      t.reset();
      s.ok = false;
      s.error = "open flow: " + err->reason;
      co_return s;
    }
  }
  const in_flight guard(st, t);
  const datagram_probe probe = plan_datagram(st, s.seq, s.path);
  t->arm();
  const auto t0 = std::chrono::steady_clock::now();
  const auto err = co_await t->round_trip(probe.datagram, probe.mine, reply);
  const auto t1 = std::chrono::steady_clock::now();
  t->disarm();
  s.flow = t->direct_flow();
  s.ns = elapsed_ns(t0, t1);
  record_datagram(s, st.opts.target.scheme, reply, err, plan.spec->kind);
  co_return s;
}

// One phase: rounds [first, count) of every path in a fresh random order; negative rounds are
// warm-ups. Returns false when the run gave up (every path failing round after round).
template <class TakeSample>
awaitable<bool> run_rounds(state& st, std::vector<std::size_t>& order, int first, int count, const std::string& mode,
                           TakeSample take_sample) {
  for (int round = first; round < count; ++round) {
    shuffle_order(order, st.rng);
    bool any_ok = false;
    std::string last_error;
    for (const auto p : order) {
      if (st.signal != 0) co_return false;
      auto s = co_await take_sample(p, round);
      if (st.signal != 0) co_return false;  // cancelled or not, the sample in flight is abandoned
      any_ok = any_ok || s.ok;
      if (!s.ok) last_error = s.error;
      if (round >= 0) st.samples.push_back(std::move(s));
      st.bar.step(round < 0 ? mode + " (warm-up)" : mode + " " + st.plans[p].spec->name);
      co_await pause(st);
    }
    if (give_up(st, any_ok, last_error)) co_return false;
  }
  co_return true;
}

awaitable<void> run_all(state& st) {
  const auto& o = st.opts;
  const std::size_t n = st.plans.size();
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  if (is_datagram(o.target.scheme)) {
    const bool go = co_await run_rounds(st, order, o.new_count > 0 ? -o.warmup : 0, o.new_count, "new",
                                        [&st](std::size_t p, int round) { return datagram_new_sample(st, p, round); });
    if (!go || o.reuse_count <= 0) co_return;
    std::vector<std::shared_ptr<datagram_tunnel>> flows(n);
    (void)co_await run_rounds(st, order, -o.warmup, o.reuse_count, "reuse", [&st, &flows](std::size_t p, int round) {
      return datagram_reuse_sample(st, p, round, flows[p]);
    });
    for (auto& f : flows)
      if (f) f->close();
    co_return;
  }

  const bool go_on =
      co_await run_rounds(st, order, o.new_count > 0 ? -o.warmup : 0, o.new_count, "new",
                          [&st](std::size_t p, int round) { return new_connection_sample(st, p, round); });
  if (!go_on || o.reuse_count <= 0) co_return;
  std::vector<std::shared_ptr<tunnel>> tunnels(n);
  (void)co_await run_rounds(st, order, -o.warmup, o.reuse_count, "reuse", [&st, &tunnels](std::size_t p, int round) {
    return reuse_sample(st, p, round, tunnels[p]);
  });
  for (auto& t : tunnels)
    if (t) t->close();
}

}  // namespace

std::string format_get(const target_url& target, std::string_view run_id, std::uint64_t seq,
                       std::string_view path_name) {
  std::string r;
  r.reserve(192);
  r.append("GET ").append(target.path).append(" HTTP/1.1\r\nHost: ").append(target.authority());
  r.append("\r\nUser-Agent: vlessbench\r\nX-Vlessbench-Run: ").append(run_id);
  r.append("\r\nX-Vlessbench-Seq: ").append(std::to_string(seq));
  r.append("\r\nX-Vlessbench-Path: ").append(path_name).append("\r\n\r\n");
  return r;
}

std::string format_post_sink(const target_url& target, std::string_view run_id, std::uint64_t seq,
                             std::string_view path_name, std::uint64_t bytes) {
  std::string r;
  r.reserve(224);
  r.append("POST /sink HTTP/1.1\r\nHost: ").append(target.authority());
  r.append("\r\nUser-Agent: vlessbench\r\nContent-Length: ").append(std::to_string(bytes));
  r.append("\r\nX-Vlessbench-Run: ").append(run_id);
  r.append("\r\nX-Vlessbench-Seq: ").append(std::to_string(seq));
  r.append("\r\nX-Vlessbench-Path: ").append(path_name).append("\r\n\r\n");
  return r;
}

std::string format_echo_line(std::string_view run_id, std::uint64_t seq, std::string_view path_name) {
  std::string r("vlessbench run=");
  r.append(run_id).append(" seq=").append(std::to_string(seq)).append(" path=").append(path_name).append("\n");
  return r;
}

void shuffle_order(std::vector<std::size_t>& order, stats::prng& rng) {
  for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
}

namespace {

// The first SIGINT/SIGTERM stops the run before the next sample and cancels the one in flight;
// a second exits at once, as hyperfine and iperf3 do.
void wait_for_signal(state& st, asio::signal_set& signals) {
  signals.async_wait([&st, &signals](std::error_code ec, int sig) {
    if (ec) return;  // cancelled: the run ended
    if (st.signal != 0) {
      constexpr std::string_view again = "\nvlessbench: second signal: exiting without writing the results\n";
      (void)!::write(STDERR_FILENO, again.data(), again.size());
      std::_Exit(128 + sig);
    }
    st.signal = sig;
    if (st.cancel) st.cancel();
    std::fprintf(stderr, "\nvlessbench: %s: stopping; writing the samples taken so far (again to exit at once)\n",
                 sig == SIGINT ? "SIGINT" : "SIGTERM");
    wait_for_signal(st, signals);
  });
}

}  // namespace

std::vector<sample> measure(const measure_options& opts, measure_end* end) {
  asio::io_context io(1);
  const auto phase = [&](int count) { return count > 0 ? count + opts.warmup : 0; };
  const auto per_path =
      static_cast<std::size_t>(phase(opts.new_count)) + static_cast<std::size_t>(phase(opts.reuse_count));
  state st{opts,
           io,
           {},
           std::vector<route_label>(opts.paths.size()),
           {},
           0,
           stats::prng(opts.seed),
           progress_bar(opts.progress, opts.progress_every_s, per_path * opts.paths.size()),
           0,
           {},
           end,
           0,
           nullptr};
  st.plans.reserve(opts.paths.size());
  for (const auto& p : opts.paths) st.plans.push_back(make_plan(io, p, opts.target, opts.vless_defaults));
  st.samples.reserve(opts.paths.size() * static_cast<std::size_t>(opts.new_count + opts.reuse_count));

  std::optional<asio::signal_set> signals;
  if (opts.handle_signals) {
    signals.emplace(io, SIGINT, SIGTERM);
    wait_for_signal(st, *signals);
  }
  std::exception_ptr failure;
  asio::co_spawn(io, run_all(st), [&](std::exception_ptr e) {
    failure = e;
    if (signals) signals->cancel();
  });
  io.run();
  st.bar.finish();
  if (failure) std::rethrow_exception(failure);
  if (end) {
    end->aborted = st.aborted;
    end->signal = st.signal;
    end->interrupted = st.signal == SIGINT ? "SIGINT" : st.signal == SIGTERM ? "SIGTERM" : "";
  }
  return std::move(st.samples);
}

}  // namespace vlessbench::runner
