// A VLESS session's end (server/session_core.hpp): session_core::finish settles the close reason
// (the first cause from outside the session's I/O wins over the relay's own, a refusal over any
// cause, a cause during the TLS shutdown only cuts that shutdown) and writes the session's one
// line, vless.reject or vless.session, with the reason's text.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "server/session_core.hpp"

using namespace vlessbench;
using namespace vlessbench::vless_server;
using namespace vlessbench::vless_server::detail;
using cause = session_ending::cause;

namespace {

// A runtime whose access log goes to a file of its own, and a session accepted on it.
struct fixture {
  runtime rt;
  std::filesystem::path log_path;
  session_start start;

  fixture() {
    rt.cfg = std::make_shared<config>(default_config());
    rt.live.publish(rt.cfg);
    static int n = 0;
    log_path = std::filesystem::temp_directory_path() /
               ("vlessbench-session-core-" + std::to_string(::getpid()) + "-" + std::to_string(++n) + ".jsonl");
    std::filesystem::remove(log_path);
    rt.log.open(log_path.string());
    start.listener = std::make_shared<listener_runtime>();
    start.cfg = rt.cfg;
    start.listener_name = "raw-tls";
    start.session_id = 7;
    start.client = tcp::endpoint(asio::ip::make_address("127.0.0.1"), 40000);
  }
  fixture(const fixture&) = delete;
  fixture& operator=(const fixture&) = delete;
  ~fixture() { std::filesystem::remove(log_path); }

  std::vector<nlohmann::json> lines() {
    REQUIRE(rt.log.flush(std::chrono::seconds(2)));
    std::ifstream in(log_path);
    std::vector<nlohmann::json> out;
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    return out;
  }

  // The one line a session wrote.
  nlohmann::json only_line() {
    auto all = lines();
    REQUIRE(all.size() == 1);
    return all.front();
  }
};

// A session that ran its relay until it ended with relay_reason, cut first by the causes in order
// (each in the phase given), then finished: the reason on its vless.session line.
std::string close_reason_of(close_reason relay_reason, std::vector<std::pair<cause, session_phase>> causes) {
  fixture f;
  session_core s(f.rt, f.start);
  s.enter(session_phase::relay);
  for (const auto& [c, at] : causes) {
    s.enter(at);
    s.end_by(c);
  }
  s.relay_ends(relay_reason);
  s.enter(session_phase::close);
  s.finish(transport::facts{.transport = "tls"}, relay_summary{});
  const auto line = f.only_line();
  CHECK(line["event"] == "vless.session");
  return line["close_reason"].get<std::string>();
}

}  // namespace

TEST_CASE("session_core: with nothing from outside, the relay's own reason is the close reason", "[session_core]") {
  CHECK(close_reason_of(close_reason::client_eof, {}) == "client_eof");
  CHECK(close_reason_of(close_reason::upstream_eof, {}) == "upstream_eof");
  CHECK(close_reason_of(close_reason::client_error, {}) == "client_error");
  CHECK(close_reason_of(close_reason::upstream_error, {}) == "upstream_error");
  CHECK(close_reason_of(close_reason::mux_error, {}) == "mux_error");
  CHECK(close_reason_of(close_reason::udp_packet_too_large, {}) == "udp_packet_too_large");
  CHECK(close_reason_of(close_reason::udp_truncated_packet, {}) == "udp_truncated_packet");
  CHECK(close_reason_of(close_reason::drain, {}) == "drain");  // the destination closed during a drain
}

TEST_CASE("session_core: a cause that cut the relay names the close, with its own text", "[session_core]") {
  const auto relay = session_phase::relay;
  CHECK(close_reason_of(close_reason::client_error, {{cause::timeout, relay}}) == "timeout");
  CHECK(close_reason_of(close_reason::client_error, {{cause::drain, relay}}) == "drain");
  CHECK(close_reason_of(close_reason::upstream_eof, {{cause::user_removed, relay}}) == "user_removed");
  CHECK(close_reason_of(close_reason::client_eof, {{cause::slow_transfer, relay}}) == "slow_transfer");
  // An eviction reaches only a pending session, whose failed step names it (a refusal): past
  // admission it is no close reason.
  CHECK(close_reason_of(close_reason::client_error, {{cause::evicted, relay}}) == "client_error");
}

TEST_CASE("session_core: the first cause wins over every later one", "[session_core]") {
  const auto relay = session_phase::relay;
  CHECK(close_reason_of(close_reason::client_error, {{cause::drain, relay}, {cause::timeout, relay}}) == "drain");
  CHECK(close_reason_of(close_reason::client_error, {{cause::timeout, relay}, {cause::drain, relay}}) == "timeout");
  CHECK(close_reason_of(close_reason::client_error, {{cause::slow_transfer, relay}, {cause::timeout, relay}}) ==
        "slow_transfer");
  CHECK(close_reason_of(close_reason::client_error, {{cause::user_removed, relay}, {cause::drain, relay}}) ==
        "user_removed");
  // A timeout in the relay stays the reason when a drain then cuts the TLS shutdown.
  CHECK(close_reason_of(close_reason::client_error, {{cause::timeout, relay}, {cause::drain, session_phase::close}}) ==
        "timeout");
}

TEST_CASE("session_core: a deadline or a drain during the TLS shutdown leaves the relay's reason", "[session_core]") {
  const auto close = session_phase::close;
  CHECK(close_reason_of(close_reason::client_eof, {{cause::timeout, close}}) == "client_eof");
  CHECK(close_reason_of(close_reason::upstream_eof, {{cause::drain, close}}) == "upstream_eof");
  // ... and a cause after it changes nothing either: the first was the shutdown's.
  CHECK(close_reason_of(close_reason::upstream_eof, {{cause::timeout, close}, {cause::user_removed, close}}) ==
        "upstream_eof");
}

TEST_CASE("session_core: a refusal is the one vless.reject line, whatever came after it", "[session_core]") {
  fixture f;
  session_core s(f.rt, f.start);
  s.enter(session_phase::connect);
  s.reject(reject_code::bad_port, "port 0");
  s.end_by(cause::timeout);
  s.finish(transport::facts{.transport = "tls"}, relay_summary{});
  const auto line = f.only_line();
  CHECK(line["event"] == "vless.reject");
  CHECK(line["reason"] == "bad_port");
  CHECK(line["phase"] == "connect");
  CHECK(line["detail"] == "port 0");
  CHECK(line["session"] == 7);
  CHECK_FALSE(line.contains("close_reason"));
}

TEST_CASE("session_core: a failed step names the first cause that cut it", "[session_core]") {
  auto refused = [](std::vector<cause> causes) {
    fixture f;
    session_core s(f.rt, f.start);
    s.enter(session_phase::header);
    for (const auto c : causes) s.end_by(c);
    s.reject_io(reject_code::header_timeout, "truncated_header", "short read");
    s.finish(transport::facts{.transport = "tls"}, relay_summary{});
    const auto line = f.only_line();
    CHECK(line["event"] == "vless.reject");
    CHECK(line["phase"] == "header");
    return line["reason"].get<std::string>();
  };
  CHECK(refused({}) == "truncated_header");
  CHECK(refused({cause::timeout}) == "header_timeout");
  CHECK(refused({cause::drain}) == "drain");
  CHECK(refused({cause::evicted}) == "evicted");
  CHECK(refused({cause::evicted, cause::timeout}) == "evicted");
  CHECK(refused({cause::timeout, cause::evicted}) == "header_timeout");
}

TEST_CASE("session_core: every phase's text on the vless.reject line", "[session_core]") {
  const std::pair<session_phase, const char*> phases[] = {
      {session_phase::tls, "tls"},         {session_phase::header, "header"}, {session_phase::resolve, "resolve"},
      {session_phase::connect, "connect"}, {session_phase::relay, "relay"},   {session_phase::close, "close"}};
  for (const auto& [p, text] : phases) CHECK(to_string(p) == text);
}

TEST_CASE("session_core: finish gives the session's slot back before its line", "[session_core]") {
  fixture f;
  session_core s(f.rt, f.start);
  REQUIRE(s.admit());
  CHECK(f.rt.vless_sessions.load() == 1);
  s.enter(session_phase::close);
  s.finish(transport::facts{.transport = "tls"}, relay_summary{});
  CHECK(f.rt.vless_sessions.load() == 0);
  const auto line = f.only_line();
  CHECK(line["event"] == "vless.session");
  CHECK(line["close_reason"] == "client_eof");
  CHECK(line["cmd"] == "tcp");
}
