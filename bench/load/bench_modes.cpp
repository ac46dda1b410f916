// The benchmark's modes (bench/run.py): closed-loop handshakes, bulk download and upload, through
// a VLESS+TLS server, a bare TLS terminator (--tls-server) or directly to the HTTP target, and the handshake's crypto
// costs. One io_context per thread, every loop bounded in count and time. Prints one JSON object on stdout.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <openssl/curve25519.h>
#include <openssl/ec_key.h>
#include <openssl/ecdsa.h>
#include <openssl/nid.h>

#include "core/wire/http_parser.hpp"
#include "load.hpp"
#include "core/wire/quantile.hpp"

namespace vlessbench::load {

namespace {

// What every connection needs, made once.
struct plan {
  bench_options opt;
  tcp::endpoint target;
  std::optional<vless::client_plan> vless;  // empty: straight to the target (or through the proxy);
                                            // a bare TLS plan for --tls-server
  std::optional<tcp::endpoint> proxy;       // HTTP proxy to CONNECT through (no VLESS client then)
  clock::time_point stop_at;
};

// One connection: through the VLESS client, or plain TCP to the target.
class conn {
 public:
  conn(asio::any_io_executor ex, const plan& p) : p_(p), sock_(ex) {
    if (p.vless) client_.emplace(sock_, *p.vless);
  }

  awaitable<std::error_code> open() {
    if (client_) {
      if (auto ec = co_await client_->connect()) co_return ec;
      co_return co_await client_->handshake();
    }
    auto [ec] = co_await sock_.async_connect(p_.proxy ? *p_.proxy : p_.target, as_tuple_awaitable);
    if (ec) co_return ec;
    sock_.set_option(tcp::no_delay(true), ec);
    if (p_.proxy) co_return co_await proxy_connect();
    co_return std::error_code{};
  }

  // The VLESS header travels with the first write, as the runner's client sends it.
  awaitable<std::error_code> write(std::string_view data) {
    return client_ ? client_->write(data) : socket_write(data);
  }
  // Payload bytes (the client has taken the VLESS response header off).
  awaitable<std::error_code> read(char* data, std::size_t size, std::size_t& n) {
    return client_ ? client_->read_some(data, size, n) : socket_read(data, size, n);
  }

  // Reads one response head; returns its Content-Length (or -1 on error). Body bytes that came
  // with the head are counted in body_seen.
  awaitable<std::int64_t> read_head(std::vector<char>& buf, std::size_t& body_seen) {
    std::size_t used = 0;
    for (;;) {
      std::size_t n = 0;
      if (co_await read(buf.data() + used, buf.size() - used, n)) co_return -1;
      used += n;
      auto r = http::parse_response(std::string_view(buf.data(), used));
      if (r.invalid()) co_return -1;
      if (r.complete()) {
        body_seen = used - r.consumed;
        co_return static_cast<std::int64_t>(r.value.content_length.value_or(0));
      }
      if (used == buf.size()) co_return -1;
    }
  }

  void close() {
    std::error_code ignored;
    sock_.close(ignored);
  }

 private:
  // CONNECT to the target through the HTTP proxy; the proxy's answer must be a 200 head with
  // nothing after it (the target speaks only once asked).
  awaitable<std::error_code> proxy_connect() {
    const std::string hp = p_.target.address().to_string() + ":" + std::to_string(p_.target.port());
    const std::string req = "CONNECT " + hp + " HTTP/1.1\r\nHost: " + hp + "\r\n\r\n";
    if (auto ec = co_await socket_write(req)) co_return ec;
    std::array<char, 4096> buf{};
    std::size_t used = 0;
    while (used < buf.size()) {
      std::size_t n = 0;
      if (auto ec = co_await socket_read(buf.data() + used, buf.size() - used, n)) co_return ec;
      used += n;
      auto r = http::parse_response(std::string_view(buf.data(), used));
      if (r.invalid()) break;
      if (r.complete()) {
        if (r.value.status != 200 || r.consumed != used) break;
        co_return std::error_code{};
      }
    }
    co_return std::make_error_code(std::errc::protocol_error);
  }
  awaitable<std::error_code> socket_write(std::string_view data) {
    auto [ec, n] = co_await asio::async_write(sock_, asio::buffer(data.data(), data.size()), as_tuple_awaitable);
    (void)n;
    co_return ec;
  }
  awaitable<std::error_code> socket_read(char* data, std::size_t size, std::size_t& n) {
    auto [ec, got] = co_await sock_.async_read_some(asio::buffer(data, size), as_tuple_awaitable);
    n = got;
    co_return ec;
  }

  const plan& p_;
  tcp::socket sock_;
  std::optional<vless::client> client_;
};

struct totals {
  std::atomic<std::uint64_t> ok{0}, failed{0}, bytes{0};
  std::mutex m;
  std::vector<double> latencies_us;
  std::string first_error;
  void fail(const std::string& why) {
    ++failed;
    std::lock_guard l(m);
    if (first_error.empty()) first_error = why;
  }
};

std::string request_for(const plan& p, std::string_view path, std::string_view extra = {}) {
  std::string r = "GET ";
  if (extra.starts_with("POST")) r = "POST ";
  r += path;
  r += " HTTP/1.1\r\nHost: " + p.target.address().to_string() + ":" + std::to_string(p.target.port()) +
       "\r\nUser-Agent: vlessbench-load\r\n";
  if (extra.starts_with("POST")) r += std::string(extra.substr(4));
  r += "\r\n";
  return r;
}

// Closed loop: connect, (TLS, VLESS header +) GET /generate_204, read the head, close. Repeat.
awaitable<void> handshake_worker(const plan& p, totals& t) {
  auto ex = co_await asio::this_coro::executor;
  const std::string req = request_for(p, "/generate_204", "");
  std::vector<char> buf(16 * 1024);
  while (clock::now() < p.stop_at && t.ok + t.failed < p.opt.max_count) {
    const auto t0 = clock::now();
    conn c(ex, p);
    if (auto ec = co_await c.open()) {
      t.fail("open: " + ec.message());
      continue;
    }
    if (auto ec = co_await c.write(req)) {
      t.fail("write: " + ec.message());
      continue;
    }
    std::size_t seen = 0;
    if (co_await c.read_head(buf, seen) < 0) {
      t.fail("response head");
      continue;
    }
    c.close();
    ++t.ok;
    const double us = std::chrono::duration<double, std::micro>(clock::now() - t0).count();
    std::lock_guard l(t.m);
    t.latencies_us.push_back(us);
  }
}

std::vector<char>& pattern() {
  static std::vector<char> block = [] {
    std::vector<char> b(256 * 1024);
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<char>('A' + i % 23);
    return b;
  }();
  return block;
}

// One session: GET /bytes/N and read it all, or POST /sink with N bytes and read the answer.
awaitable<void> bulk_worker(const plan& p, totals& t, bool down) {
  auto ex = co_await asio::this_coro::executor;
  conn c(ex, p);
  if (auto ec = co_await c.open()) co_return t.fail("open: " + ec.message());
  const std::uint64_t n = p.opt.bytes;
  std::vector<char> buf(256 * 1024);
  if (down) {
    if (auto ec = co_await c.write(request_for(p, "/bytes/" + std::to_string(n))))
      co_return t.fail("write: " + ec.message());
  } else {
    const std::string head = request_for(p, "/sink", "POSTContent-Length: " + std::to_string(n) + "\r\n");
    if (auto ec = co_await c.write(head)) co_return t.fail("write: " + ec.message());
    const auto& block = pattern();
    std::uint64_t left = n;
    while (left > 0) {
      if (clock::now() > p.stop_at) co_return t.fail("upload: time limit");
      const std::size_t k = static_cast<std::size_t>(std::min<std::uint64_t>(left, block.size()));
      if (auto ec = co_await c.write(std::string_view(block.data(), k))) co_return t.fail("upload: " + ec.message());
      left -= k;
      t.bytes += k;
    }
  }
  std::size_t seen = 0;
  const auto length = co_await c.read_head(buf, seen);
  if (length < 0) co_return t.fail("response head");
  std::uint64_t got = seen;
  while (got < static_cast<std::uint64_t>(length)) {
    if (clock::now() > p.stop_at) co_return t.fail("download: time limit");
    std::size_t k = 0;
    if (auto ec = co_await c.read(buf.data(), buf.size(), k)) co_return t.fail("download: " + ec.message());
    got += k;
  }
  if (down) t.bytes += got;
  c.close();
  ++t.ok;
}

// The handshake's public-key operations in the linked BoringSSL, microseconds each: what a TLS 1.3
// handshake with an ECDSA P-256 certificate and X25519 costs the server (sign, key pair, shared
// secret) and the client (verify, key pair, shared secret) in crypto alone.
int crypto_costs(int n) {
  bssl::UniquePtr<EC_KEY> key(EC_KEY_new_by_curve_name(NID_X9_62_prime256v1));
  if (!key || !EC_KEY_generate_key(key.get())) return 1;
  std::array<std::uint8_t, 32> digest{1};
  std::array<std::uint8_t, 128> sig{};
  unsigned sig_len = 0;
  std::array<std::uint8_t, 32> pub{}, priv{}, shared{};
  auto time_us = [n](auto&& op) {
    const auto t0 = clock::now();
    for (int i = 0; i < n; ++i) op();
    return std::chrono::duration<double, std::micro>(clock::now() - t0).count() / n;
  };
  const double sign = time_us([&] { ECDSA_sign(0, digest.data(), digest.size(), sig.data(), &sig_len, key.get()); });
  const double verify =
      time_us([&] { (void)ECDSA_verify(0, digest.data(), digest.size(), sig.data(), sig_len, key.get()); });
  const double keypair = time_us([&] { X25519_keypair(pub.data(), priv.data()); });
  const double x25519 = time_us([&] { (void)X25519(shared.data(), priv.data(), pub.data()); });
  std::printf(
      "{\"mode\": \"crypto\", \"n\": %d, \"ecdsa_p256_sign_us\": %.1f, \"ecdsa_p256_verify_us\": %.1f, "
      "\"x25519_keypair_us\": %.1f, \"x25519_shared_us\": %.1f}\n",
      n, sign, verify, keypair, x25519);
  return 0;
}

}  // namespace

int run_bench(const bench_options& o) {
  if (o.mode == "crypto") return crypto_costs(static_cast<int>(std::clamp<std::uint64_t>(o.max_count, 100, 2000)));
  std::signal(SIGPIPE, SIG_IGN);

  plan p;
  p.opt = o;
  p.target = endpoint_arg("--target", o.where.target);
  if (!o.where.http_proxy.empty()) p.proxy = endpoint_arg("--http-proxy", o.where.http_proxy);
  if (!o.where.server.empty() || !o.where.tls_server.empty()) {
    tls::client_options tls;
    tls.sni = "localhost";
    tls.tls13_only = true;
    p.vless = vless_plan(o.where, tls);
  }

  totals t;
  const auto t0 = clock::now();
  p.stop_at = t0 + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(o.seconds));
  std::vector<std::unique_ptr<asio::io_context>> ios;
  for (int i = 0; i < o.threads; ++i) ios.push_back(std::make_unique<asio::io_context>(1));

  std::atomic<int> finished{0};
  for (int i = 0; i < o.workers; ++i) {
    auto& io = *ios[static_cast<std::size_t>(i % o.threads)];
    auto work = o.mode == "handshakes" ? handshake_worker(p, t) : bulk_worker(p, t, o.mode == "down");
    asio::co_spawn(io, std::move(work), [&finished](std::exception_ptr) { ++finished; });
  }
  std::vector<std::thread> threads;
  for (auto& io : ios) threads.emplace_back([&io] { io->run(); });
  // Every worker stops by itself at stop_at; a stuck one is cut off a little later.
  const auto hard_stop = p.stop_at + std::chrono::seconds(5);
  while (finished < o.workers && clock::now() < hard_stop) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  for (auto& io : ios) io->stop();
  for (auto& th : threads) th.join();
  const double secs = std::chrono::duration<double>(clock::now() - t0).count();
  const auto latency = [&t](double q) { return stats::quantile(t.latencies_us, q).value_or(0); };
  std::printf(
      "{\"mode\": \"%s\", \"ok\": %llu, \"failed\": %llu, \"seconds\": %.4f, \"bytes\": %llu, "
      "\"per_second\": %.2f, \"mbytes_per_second\": %.2f, \"latency_median_us\": %.1f, "
      "\"latency_p95_us\": %.1f, \"error\": \"%s\"}\n",
      o.mode.c_str(), static_cast<unsigned long long>(t.ok.load()), static_cast<unsigned long long>(t.failed.load()),
      secs, static_cast<unsigned long long>(t.bytes.load()), static_cast<double>(t.ok.load()) / secs,
      static_cast<double>(t.bytes.load()) / secs / 1e6, latency(0.5), latency(0.95),
      json_escape(t.first_error).c_str());
  return t.failed && !t.ok ? 1 : 0;
}

}  // namespace vlessbench::load
