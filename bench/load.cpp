// vlessbench_load: the load generator of bench/run.py. Closed-loop handshakes, bulk download and
// upload, and idle sessions, through a VLESS+TLS server or directly to the HTTP target. One
// io_context per thread, every loop bounded in count and time. Prints one JSON object on stdout.
#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <poll.h>

#include <openssl/curve25519.h>
#include <openssl/ec_key.h>
#include <openssl/ecdsa.h>
#include <openssl/nid.h>

#include "asio_compat.hpp"
#include "http_parser.hpp"
#include "tls.hpp"
#include "vless_codec.hpp"

namespace vb = vlessbench;
using vb::as_tuple_awaitable;
using vb::awaitable;
using vb::tcp;
using clock_type = std::chrono::steady_clock;

namespace {

struct options {
  std::string mode;                // handshakes | down | up | idle
  std::string server;              // host:port of the VLESS+TLS server; empty = direct to target
  std::string target = "127.0.0.1:8080";
  std::string uuid;
  int workers = 1;                 // concurrent connections (handshakes) or sessions (down/up/idle)
  int threads = 1;
  double seconds = 5;              // handshakes: run time; others: hard limit
  std::uint64_t bytes = 1ull << 30;  // down/up: per session
  std::uint64_t max_count = 1'000'000;
};

tcp::endpoint parse_endpoint(const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos) throw std::invalid_argument("want HOST:PORT: " + text);
  return {asio::ip::make_address(text.substr(0, colon)),
          static_cast<unsigned short>(std::stoi(text.substr(colon + 1)))};
}

// What every connection needs, made once.
struct plan {
  options opt;
  tcp::endpoint entry;   // server, or the target when direct
  tcp::endpoint target;
  bool vless = false;
  std::string vless_header;
  std::shared_ptr<asio::ssl::context> tls;
  clock_type::time_point stop_at;
};

// One connection: TCP, then TLS + VLESS header when going through the server.
class conn {
 public:
  conn(asio::any_io_executor ex, const plan& p) : p_(p), sock_(ex) {
    if (p.vless) tls_.emplace(sock_, *p.tls);
  }

  awaitable<std::error_code> open() {
    auto [ec] = co_await sock_.async_connect(p_.entry, as_tuple_awaitable);
    if (ec) co_return ec;
    sock_.set_option(tcp::no_delay(true), ec);
    if (tls_) {
      vb::tls::prepare_client(tls_->native_handle(), {false, "localhost", "http/1.1", true});
      auto [hec] = co_await tls_->async_handshake(asio::ssl::stream_base::client, as_tuple_awaitable);
      if (hec) co_return hec;
      pending_vless_ = true;
      response_header_left_ = 2;
    }
    co_return std::error_code{};
  }

  // The VLESS request header travels with the first write, as the runner's client sends it.
  awaitable<std::error_code> write(std::string_view data) {
    std::array<asio::const_buffer, 2> parts{asio::buffer(p_.vless_header), asio::buffer(data)};
    if (!pending_vless_) parts[0] = asio::const_buffer();
    pending_vless_ = false;
    auto [ec, n] = tls_ ? co_await asio::async_write(*tls_, parts, as_tuple_awaitable)
                        : co_await asio::async_write(sock_, parts, as_tuple_awaitable);
    (void)n;
    co_return ec;
  }

  // Reads payload bytes (the VLESS response header, 2 bytes without addons, is skipped).
  awaitable<std::pair<std::error_code, std::size_t>> read(char* data, std::size_t size) {
    for (;;) {
      auto [ec, n] = tls_ ? co_await tls_->async_read_some(asio::buffer(data, size), as_tuple_awaitable)
                          : co_await sock_.async_read_some(asio::buffer(data, size), as_tuple_awaitable);
      if (ec) co_return std::pair{ec, std::size_t{0}};
      if (response_header_left_ > 0) {
        const std::size_t skip = std::min(response_header_left_, n);
        std::memmove(data, data + skip, n - skip);
        response_header_left_ -= skip;
        n -= skip;
        if (n == 0) continue;
      }
      co_return std::pair{std::error_code{}, n};
    }
  }

  // Reads one response head; returns its Content-Length (or -1 on error). Body bytes that came
  // with the head are counted in body_seen.
  awaitable<std::int64_t> read_head(std::vector<char>& buf, std::size_t& body_seen) {
    std::size_t used = 0;
    for (;;) {
      auto [ec, n] = co_await read(buf.data() + used, buf.size() - used);
      if (ec) co_return -1;
      used += n;
      auto r = vb::http::parse_response(std::string_view(buf.data(), used));
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
  const plan& p_;
  tcp::socket sock_;
  std::optional<asio::ssl::stream<tcp::socket&>> tls_;
  bool pending_vless_ = false;
  std::size_t response_header_left_ = 0;
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
  while (clock_type::now() < p.stop_at && t.ok + t.failed < p.opt.max_count) {
    const auto t0 = clock_type::now();
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
    const double us = std::chrono::duration<double, std::micro>(clock_type::now() - t0).count();
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
      if (clock_type::now() > p.stop_at) co_return t.fail("upload: time limit");
      const std::size_t k = static_cast<std::size_t>(std::min<std::uint64_t>(left, block.size()));
      if (auto ec = co_await c.write(std::string_view(block.data(), k)))
        co_return t.fail("upload: " + ec.message());
      left -= k;
      t.bytes += k;
    }
  }
  std::size_t seen = 0;
  const auto length = co_await c.read_head(buf, seen);
  if (length < 0) co_return t.fail("response head");
  std::uint64_t got = seen;
  while (got < static_cast<std::uint64_t>(length)) {
    if (clock_type::now() > p.stop_at) co_return t.fail("download: time limit");
    auto [ec, k] = co_await c.read(buf.data(), buf.size());
    if (ec) co_return t.fail("download: " + ec.message());
    got += k;
  }
  if (down) t.bytes += got;
  c.close();
  ++t.ok;
}

// Idle: open a session, send GET / so the server has dialled upstream and relayed once, read the
// answer, then hold the connection until released.
awaitable<void> idle_worker(const plan& p, totals& t, std::shared_ptr<std::vector<std::unique_ptr<conn>>> keep) {
  auto ex = co_await asio::this_coro::executor;
  auto c = std::make_unique<conn>(ex, p);
  if (auto ec = co_await c->open()) co_return t.fail("open: " + ec.message());
  if (auto ec = co_await c->write(request_for(p, "/"))) co_return t.fail("write: " + ec.message());
  std::vector<char> buf(4096);
  std::size_t seen = 0;
  const auto length = co_await c->read_head(buf, seen);
  if (length < 0) co_return t.fail("response head");
  std::uint64_t got = seen;
  while (got < static_cast<std::uint64_t>(length)) {
    auto [ec, k] = co_await c->read(buf.data(), buf.size());
    if (ec) co_return t.fail("read: " + ec.message());
    got += k;
  }
  ++t.ok;
  keep->push_back(std::move(c));
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(pos);
  const auto hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
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
    const auto t0 = clock_type::now();
    for (int i = 0; i < n; ++i) op();
    return std::chrono::duration<double, std::micro>(clock_type::now() - t0).count() / n;
  };
  const double sign = time_us([&] { ECDSA_sign(0, digest.data(), digest.size(), sig.data(), &sig_len, key.get()); });
  const double verify =
      time_us([&] { (void)ECDSA_verify(0, digest.data(), digest.size(), sig.data(), sig_len, key.get()); });
  const double keypair = time_us([&] { X25519_keypair(pub.data(), priv.data()); });
  const double x25519 = time_us([&] { (void)X25519(shared.data(), priv.data(), pub.data()); });
  std::printf("{\"mode\": \"crypto\", \"n\": %d, \"ecdsa_p256_sign_us\": %.1f, \"ecdsa_p256_verify_us\": %.1f, "
              "\"x25519_keypair_us\": %.1f, \"x25519_shared_us\": %.1f}\n",
              n, sign, verify, keypair, x25519);
  return 0;
}

int usage() {
  std::cerr << "usage: vlessbench_load MODE [--server H:P --uuid UUID] [--target H:P] [--workers N]\n"
               "       [--threads N] [--seconds S] [--bytes N] [--max N]\n"
               "MODE: handshakes | down | up | idle (idle: holds sessions until stdin closes) | crypto\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  if (argc < 2) return usage();
  o.mode = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--server") o.server = v;
    else if (k == "--target") o.target = v;
    else if (k == "--uuid") o.uuid = v;
    else if (k == "--workers") o.workers = std::clamp(std::stoi(v), 1, 10000);
    else if (k == "--threads") o.threads = std::clamp(std::stoi(v), 1, 16);
    else if (k == "--seconds") o.seconds = std::clamp(std::stod(v), 0.1, 600.0);
    else if (k == "--bytes") o.bytes = std::stoull(v);
    else if (k == "--max") o.max_count = std::stoull(v);
    else return usage();
  }
  if (o.mode == "crypto") return crypto_costs(static_cast<int>(std::clamp<std::uint64_t>(o.max_count, 100, 2000)));
  if (o.mode != "handshakes" && o.mode != "down" && o.mode != "up" && o.mode != "idle") return usage();
  std::signal(SIGPIPE, SIG_IGN);

  plan p;
  p.opt = o;
  try {
    p.target = parse_endpoint(o.target);
    p.vless = !o.server.empty();
    p.entry = p.vless ? parse_endpoint(o.server) : p.target;
    if (p.vless) {
      auto uuid = vb::vless::parse_uuid(o.uuid);
      if (!uuid) throw std::invalid_argument("--uuid: not a UUID");
      vb::vless::request_header h;
      h.uuid = *uuid;
      h.command = 1;
      h.port = p.target.port();
      h.atyp = vb::vless::address_type::ipv4;
      const auto b = p.target.address().to_v4().to_bytes();
      std::copy(b.begin(), b.end(), h.ip.begin());
      p.vless_header = vb::vless::encode_request(h);
      vb::tls::client_options copt;
      copt.tls13_only = true;
      p.tls = std::make_shared<asio::ssl::context>(vb::tls::make_client_context(copt));
    }
  } catch (const std::exception& e) {
    std::cerr << "vlessbench_load: " << e.what() << "\n";
    return 2;
  }

  totals t;
  const auto t0 = clock_type::now();
  p.stop_at = t0 + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(o.seconds));
  std::vector<std::unique_ptr<asio::io_context>> ios;
  for (int i = 0; i < o.threads; ++i) ios.push_back(std::make_unique<asio::io_context>(1));

  if (o.mode == "idle") {
    // One thread; opened at most 64 at a time so the server sees a bounded accept burst.
    auto keep = std::make_shared<std::vector<std::unique_ptr<conn>>>();
    auto opener = [&]() -> awaitable<void> {
      for (int done = 0; done < o.workers && clock_type::now() < p.stop_at;) {
        const int batch = std::min(64, o.workers - done);
        for (int i = 0; i < batch; ++i) asio::co_spawn(*ios[0], idle_worker(p, t, keep), asio::detached);
        done += batch;
        while (static_cast<int>(t.ok + t.failed) < done && clock_type::now() < p.stop_at) {
          asio::steady_timer w(*ios[0], std::chrono::milliseconds(2));
          co_await w.async_wait(asio::use_awaitable);
        }
      }
      if (clock_type::now() >= p.stop_at) ios[0]->stop();
    };
    asio::co_spawn(*ios[0], opener(), asio::detached);
    ios[0]->run();
    std::printf("{\"mode\": \"idle\", \"ready\": %d, \"failed\": %llu, \"error\": \"%s\"}\n",
                static_cast<int>(keep->size()), static_cast<unsigned long long>(t.failed.load()),
                t.first_error.c_str());
    std::fflush(stdout);
    // Hold the sessions until the caller writes a line or closes our stdin; at most 120 s.
    pollfd pfd{0, POLLIN, 0};
    (void)::poll(&pfd, 1, 120'000);
    keep->clear();
    return 0;
  }

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
  while (finished < o.workers && clock_type::now() < hard_stop)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  for (auto& io : ios) io->stop();
  for (auto& th : threads) th.join();
  const double secs = std::chrono::duration<double>(clock_type::now() - t0).count();
  std::printf(
      "{\"mode\": \"%s\", \"ok\": %llu, \"failed\": %llu, \"seconds\": %.4f, \"bytes\": %llu, "
      "\"per_second\": %.2f, \"mbytes_per_second\": %.2f, \"latency_median_us\": %.1f, "
      "\"latency_p95_us\": %.1f, \"error\": \"%s\"}\n",
      o.mode.c_str(), static_cast<unsigned long long>(t.ok.load()),
      static_cast<unsigned long long>(t.failed.load()), secs, static_cast<unsigned long long>(t.bytes.load()),
      static_cast<double>(t.ok.load()) / secs, static_cast<double>(t.bytes.load()) / secs / 1e6,
      percentile(t.latencies_us, 0.5), percentile(t.latencies_us, 0.95), t.first_error.c_str());
  return t.failed && !t.ok ? 1 : 0;
}
