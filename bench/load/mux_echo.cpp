// mux-echo (issue 12, acceptance 3): ONE Mux.Cool connection made with the core client
// (core/client/mux_client.hpp), N concurrent TCP sub-connections to an echo destination, each sending
// BYTES of pseudo-random data while reading the echo back at the same time (a sub that only wrote
// would fill every buffer on the way and stall its own echo). SHA-256 of what went and of what came
// back, per sub. With --udp-dest, also one XUDP sub to a [[udp_target]] echo: --udp-packets
// datagrams, one at a time, each echoed with a trailer that must name this session's sub. One JSON
// line per sub (and one for the UDP sub), one summary line ("pass"); exit 1 on any mismatch or error.
#include <openssl/sha.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/client/mux_client.hpp"
#include "core/wire/route_header.hpp"
#include "load.hpp"

namespace vlessbench::load {

namespace {

constexpr std::size_t chunk_size = 64 * 1024;

class sha256 {
 public:
  sha256() { SHA256_Init(&ctx_); }
  void update(const char* data, std::size_t n) { SHA256_Update(&ctx_, data, n); }
  std::string finish() {
    std::array<std::uint8_t, SHA256_DIGEST_LENGTH> d{};
    SHA256_Final(d.data(), &ctx_);
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    for (auto b : d) {
      out += digits[b >> 4];
      out += digits[b & 15];
    }
    return out;
  }

 private:
  SHA256_CTX ctx_{};
};

// xorshift64*: distinct, reproducible bytes per sub, cheap enough not to be what is measured.
class random_bytes {
 public:
  explicit random_bytes(std::uint64_t seed) : s_(seed * 0x9e3779b97f4a7c15ull + 1) {}
  void fill(char* data, std::size_t n) {
    for (std::size_t i = 0; i < n; i += 8) {
      s_ ^= s_ >> 12;
      s_ ^= s_ << 25;
      s_ ^= s_ >> 27;
      const std::uint64_t v = s_ * 0x2545f4914f6cdd1dull;
      for (std::size_t k = 0; k < 8 && i + k < n; ++k) data[i + k] = static_cast<char>(v >> (8 * k));
    }
  }

 private:
  std::uint64_t s_;
};

struct sub_result {
  std::uint16_t id = 0;
  std::uint64_t sent = 0;
  std::uint64_t received = 0;
  std::string sha_sent;
  std::string sha_received;
  double seconds = 0;
  std::string error;
};

struct udp_result {
  std::uint16_t id = 0;
  std::uint64_t sent = 0;
  std::uint64_t echoed = 0;
  std::uint64_t session = 0;  // what every echo's trailer named
  std::uint32_t sub = 0;
  std::string error;
};

struct run_state {
  const mux_echo_options& opt;
  mux::connection& conn;
  mux::target dest;
  std::optional<mux::target> udp_dest;
  clock::time_point stop_at;
  std::size_t finished = 0;  // subs done (the watchdog reads it, and may outlive run())
  std::size_t total = 0;
};

awaitable<void> send_all(run_state& st, std::uint16_t id, std::uint64_t seed, sub_result& r) {
  random_bytes gen(seed);
  sha256 h;
  std::vector<char> buf(chunk_size);
  while (r.sent < st.opt.bytes && r.error.empty()) {
    if (clock::now() > st.stop_at) {
      r.error = "send: time limit";
      st.conn.close();
      break;
    }
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), st.opt.bytes - r.sent));
    gen.fill(buf.data(), n);
    h.update(buf.data(), n);
    if (auto ec = co_await st.conn.write(id, std::string_view(buf.data(), n))) {
      r.error = "send: " + ec.message();
      st.conn.close();  // the reader would wait for an echo that cannot come
      break;
    }
    r.sent += n;
  }
  r.sha_sent = h.finish();
}

awaitable<void> receive_all(run_state& st, std::uint16_t id, sub_result& r) {
  sha256 h;
  std::vector<char> buf(chunk_size);
  while (r.received < st.opt.bytes) {
    std::size_t n = 0;
    if (auto ec = co_await st.conn.read_some(id, buf.data(), buf.size(), n)) {
      if (r.error.empty()) r.error = "receive after " + std::to_string(r.received) + " bytes: " + ec.message();
      st.conn.close();  // the writer may be waiting for room the server will never make
      break;
    }
    h.update(buf.data(), n);
    r.received += n;
  }
  r.sha_received = h.finish();
}

// One sub: New, then its writer and its reader at once; End once the whole echo is back (no
// half-close: a Mux.Cool End closes both directions).
awaitable<void> run_sub(run_state& st, std::size_t index, sub_result& r) {
  const auto t0 = clock::now();
  std::uint16_t id = 0;
  if (auto ec = co_await st.conn.open(st.dest, {}, id)) {
    r.error = "open: " + ec.message();
    co_return;
  }
  r.id = id;
  co_await (send_all(st, id, index + 1, r) && receive_all(st, id, r));
  r.seconds = std::chrono::duration<double>(clock::now() - t0).count();
  st.conn.end(id);
}

// One XUDP sub: a datagram, its echo, the next (one at a time, so none is dropped on the way and
// a lost one is a failure, not a race). Each echo is the datagram's head plus the target's trailer, whose
// route must be a vless one naming a sub, the same for all.
awaitable<void> run_udp(run_state& st, udp_result& r) {
  const std::array<std::uint8_t, 8> global_id{'m', 'u', 'x', '-', 'e', 'c', 'h', 'o'};
  random_bytes gen(0xdada);
  // 64 random bytes, then room for the echo's trailer (the echo is never longer than the datagram).
  constexpr std::size_t payload = 64;
  std::string datagram(payload + udp_echo_room, '.');
  for (std::uint64_t i = 0; i < st.opt.udp_packets && r.error.empty(); ++i) {
    gen.fill(datagram.data(), payload);
    std::error_code ec;
    if (i == 0)
      ec = co_await st.conn.open_udp(*st.udp_dest, datagram, true, global_id, r.id);
    else
      ec = co_await st.conn.write_packet(r.id, datagram);
    if (ec) {
      r.error = "udp send: " + ec.message();
      break;
    }
    ++r.sent;
    mux::packet p;
    if (auto rec = co_await st.conn.read_packet(r.id, p)) {
      r.error = "udp echo " + std::to_string(i) + ": " + rec.message();
      break;
    }
    const auto echo = parse_udp_echo(p.data);
    if (!echo.complete() || echo.value.payload.substr(0, payload) != std::string_view(datagram).substr(0, payload)) {
      r.error = "udp echo " + std::to_string(i) + ": not the datagram and a route trailer";
      break;
    }
    const auto& route = echo.value.route;
    if (route.kind != route_kind::vless || !route.session || !route.sub) {
      r.error = "udp echo " + std::to_string(i) + ": the route names no mux sub";
    } else if (r.echoed > 0 && (*route.session != r.session || *route.sub != r.sub)) {
      r.error = "udp echo " + std::to_string(i) + ": the route changed";
    } else {
      r.session = *route.session;
      r.sub = *route.sub;
      ++r.echoed;
    }
  }
  if (r.id != 0) st.conn.end(r.id);
}

// Closes the connection (ending every pending read and write) once the run is past its limit.
awaitable<void> watchdog(run_state& st) {
  asio::steady_timer t(co_await asio::this_coro::executor);
  while (st.finished < st.total) {
    if (clock::now() > st.stop_at) {
      st.conn.close();
      co_return;
    }
    t.expires_after(std::chrono::milliseconds(50));
    co_await t.async_wait(as_tuple_awaitable);
  }
}

awaitable<void> run(run_state& st, std::vector<sub_result>& results, udp_result& udp, std::string& error) {
  if (auto ec = co_await st.conn.connect()) {
    error = "connect: " + ec.message();
    co_return;
  }
  if (auto ec = co_await st.conn.handshake()) {
    error = "handshake: " + ec.message();
    co_return;
  }
  auto ex = co_await asio::this_coro::executor;
  st.total = results.size() + (st.udp_dest ? 1 : 0);
  asio::steady_timer all_done(ex, asio::steady_timer::time_point::max());
  auto one_done = [&] {
    if (++st.finished == st.total) all_done.cancel();
  };
  for (std::size_t i = 0; i < results.size(); ++i)
    asio::co_spawn(ex, run_sub(st, i, results[i]), [&, i](std::exception_ptr e) {
      if (e && results[i].error.empty()) results[i].error = "exception";
      one_done();
    });
  if (st.udp_dest)
    asio::co_spawn(ex, run_udp(st, udp), [&](std::exception_ptr e) {
      if (e && udp.error.empty()) udp.error = "exception";
      one_done();
    });
  asio::co_spawn(ex, watchdog(st), [](std::exception_ptr) {});
  while (st.finished < st.total) co_await all_done.async_wait(as_tuple_awaitable);
  (void)co_await st.conn.flush();  // the queued End frames
  st.conn.close();
}

}  // namespace

int run_mux_echo(const mux_echo_options& o) {
  const auto server = endpoint_arg("--server", o.server);
  const auto dest_ep = endpoint_arg("--dest", o.dest);
  const auto uuid = vless::parse_uuid(o.uuid);
  if (!uuid) throw std::invalid_argument("--uuid: not a UUID");
  const auto dest = mux::make_target(mux::network::tcp, dest_ep.address().to_string(), dest_ep.port());
  if (!dest) throw std::invalid_argument("--dest: not a mux destination");
  std::optional<mux::target> udp_dest;
  if (!o.udp_dest.empty()) {
    const auto ep = endpoint_arg("--udp-dest", o.udp_dest);
    udp_dest = mux::make_target(mux::network::udp, ep.address().to_string(), ep.port());
    if (!udp_dest) throw std::invalid_argument("--udp-dest: not a mux destination");
  }
  tls::client_options tls;
  tls.sni = "localhost";
  tls.tls13_only = true;
  auto plan = vless::make_client_plan(server, tls, mux::vless_request(*uuid));
  if (!o.ws_path.empty()) {
    if (o.ws_path.front() != '/') throw std::invalid_argument("--ws-path: must start with '/'");
    plan.transport.kind = transport_kind::ws;
    plan.transport.path = o.ws_path;
  }

  asio::io_context io(1);
  mux::connection conn(io.get_executor(), plan);
  const auto t0 = clock::now();
  run_state st{o, conn, *dest, udp_dest,
               t0 + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(o.seconds))};
  std::vector<sub_result> results(static_cast<std::size_t>(o.subs));
  udp_result udp;
  std::string error;
  asio::co_spawn(io, run(st, results, udp, error), [&error](std::exception_ptr e) {
    if (e && error.empty()) error = "exception";
  });
  io.run();
  const double secs = std::chrono::duration<double>(clock::now() - t0).count();

  std::size_t matching = 0;
  for (std::size_t i = 0; i < results.size() && error.empty(); ++i) {
    const auto& r = results[i];
    const bool match = r.error.empty() && r.sent == o.bytes && r.received == o.bytes && r.sha_sent == r.sha_received;
    matching += match ? 1 : 0;
    const double mbps = r.seconds > 0 ? static_cast<double>(r.received) / r.seconds / 1e6 : 0;
    std::printf(
        "{\"mode\": \"mux-echo\", \"sub\": %zu, \"mux_id\": %u, \"bytes_up\": %llu, \"bytes_down\": %llu, "
        "\"seconds\": %.4f, \"mbytes_per_second\": %.2f, \"sha256_sent\": \"%s\", "
        "\"sha256_received\": \"%s\", \"match\": %s, \"error\": \"%s\"}\n",
        i, r.id, static_cast<unsigned long long>(r.sent), static_cast<unsigned long long>(r.received), r.seconds, mbps,
        r.sha_sent.c_str(), r.sha_received.c_str(), match ? "true" : "false", json_escape(r.error).c_str());
  }
  bool udp_ok = true;
  if (udp_dest && error.empty()) {
    udp_ok = udp.error.empty() && udp.echoed == o.udp_packets;
    std::printf(
        "{\"mode\": \"mux-echo\", \"udp_sub\": true, \"mux_id\": %u, \"packets_sent\": %llu, "
        "\"packets_echoed\": %llu, \"route_session\": %llu, \"route_sub\": %u, \"error\": \"%s\"}\n",
        udp.id, static_cast<unsigned long long>(udp.sent), static_cast<unsigned long long>(udp.echoed),
        static_cast<unsigned long long>(udp.session), udp.sub, json_escape(udp.error).c_str());
  }
  const bool pass = error.empty() && matching == results.size() && udp_ok;
  if (error.empty() && matching != results.size())
    error = std::to_string(results.size() - matching) + " sub(s) failed";
  else if (error.empty() && !udp_ok)
    error = "udp sub failed";
  const double total = static_cast<double>(matching) * static_cast<double>(o.bytes);
  std::printf(
      "{\"mode\": \"mux-echo\", \"pass\": %s, \"subs\": %zu, \"matching\": %zu, \"bytes_each_way\": %llu, "
      "\"seconds\": %.4f, \"mbytes_per_second_each_way\": %.2f, \"error\": \"%s\"}\n",
      pass ? "true" : "false", results.size(), matching, static_cast<unsigned long long>(o.bytes), secs,
      total / secs / 1e6, json_escape(error).c_str());
  return pass ? 0 : 1;
}

}  // namespace vlessbench::load
