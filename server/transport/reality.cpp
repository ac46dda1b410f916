#include "server/transport/reality.hpp"

#include <chrono>

#include <spdlog/spdlog.h>

namespace vlessbench::reality {

namespace {

class refusal_category_impl : public std::error_category {
 public:
  const char* name() const noexcept override { return "reality"; }
  std::string message(int v) const override {
    switch (static_cast<refusal>(v)) {
      case refusal::none: return "authenticated";
      case refusal::bad_client_hello: return "not one whole TLS ClientHello in one record; relayed to the target";
      case refusal::not_tls13: return "the ClientHello does not offer TLS 1.3; relayed to the target";
      case refusal::server_name: return "SNI not in server_names; relayed to the target";
      case refusal::no_x25519_share: return "no X25519 key share; relayed to the target";
      case refusal::mlkem_required:
        return "require_mlkem_share: no X25519MLKEM768 key share before X25519; relayed to the target";
      case refusal::auth_failed: return "the session id does not open with this listener's key; relayed to the target";
      case refusal::unknown_short_id: return "short id not in short_ids; relayed to the target";
      case refusal::time_diff: return "client time further than max_time_diff; relayed to the target";
      case refusal::replayed: return "a ClientHello random seen before (replay); relayed to the target";
    }
    return "refused";
  }
};

std::int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The session closed the client socket or cancelled the relay (its deadline, a drain, an eviction).
bool closed_under_us(std::error_code ec) {
  return ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor;
}

// One direction of the fallback relay: counts what it carried and, when it stops first, names
// the relay's end.
awaitable<void> pump(tcp::socket& from, tcp::socket& to, bool from_client, std::uint64_t& carried,
                     std::string_view& end) {
  std::vector<char> buf(16384);
  std::string_view why;
  for (;;) {
    auto [rec, n] = co_await from.async_read_some(asio::buffer(buf), as_tuple_awaitable);
    if (rec || n == 0) {
      if (closed_under_us(rec))
        why = "closed";
      else if (!rec || rec == asio::error::eof)
        why = from_client ? "client_eof" : "target_eof";
      else
        why = from_client ? "client_error" : "target_error";
      break;
    }
    auto [wec, m] = co_await asio::async_write(to, asio::buffer(buf.data(), n), as_tuple_awaitable);
    carried += m;
    if (wec) {
      why = closed_under_us(wec) ? "closed" : (from_client ? "target_error" : "client_error");
      break;
    }
  }
  if (end.empty()) end = why;
  std::error_code ignored;
  to.shutdown(tcp::socket::shutdown_send, ignored);
}

std::string names(const std::vector<std::uint16_t>& groups) {
  std::string out;
  for (const auto g : groups) {
    if (is_grease(g)) continue;
    if (!out.empty()) out += ',';
    out += group_name(g);
  }
  return out;
}

void describe(const client_hello& h, opening& out) {
  out.ja4 = ja4_fingerprint(h);
  out.groups = names(h.supported_groups);
  std::vector<std::uint16_t> shares;
  for (const auto& k : h.key_shares) shares.push_back(k.group);
  out.key_shares = names(shares);
}

}  // namespace

const std::error_category& refusal_category() {
  static const refusal_category_impl c;
  return c;
}

awaitable<opening> read_and_judge(policy_stream& client, listener_state& state, std::error_code& read_error) {
  opening out;
  out.hello.resize(max_record);
  std::size_t used = 0;
  for (;;) {
    const auto record = client_hello_record(std::span(out.hello.data(), used));
    if (record.invalid()) {
      out.why = refusal::bad_client_hello;
      break;
    }
    if (record.complete()) {
      const auto facts = read_hello_facts(record.value);
      if (!facts.complete()) {
        out.why = refusal::bad_client_hello;
        break;
      }
      describe(facts.value.hello, out);
      auto judged = authenticate(state.config(), facts.value, unix_ms_now());
      out.why = judged.why;
      if (out.why == refusal::none && !state.replays().first_use(facts.value.random)) out.why = refusal::replayed;
      if (out.why != refusal::none) spdlog::debug("REALITY refused: {}", judged.detail);
      out.auth_key = judged.auth_key;
      break;
    }
    auto [ec, n] = co_await client.async_read_some(asio::buffer(out.hello.data() + used, out.hello.size() - used),
                                                   as_tuple_awaitable);
    if (ec) {
      read_error = ec;
      out.why = refusal::bad_client_hello;
      break;
    }
    used += n;
  }
  out.hello.resize(used);
  co_return out;
}

awaitable<std::string> relay_to_target(tcp::socket& client, const listener_state& state,
                                       const std::vector<std::uint8_t>& hello, fallback_facts& out) {
  const auto started = std::chrono::steady_clock::now();
  const auto ended = [&](std::string_view end, std::string detail) {
    out.end = end;
    out.duration_us =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started).count();
    return detail;
  };
  const auto where = state.fallback();
  if (!where) co_return ended("no_target", "no target");
  const std::string name = where->first + ":" + std::to_string(where->second);
  tcp::resolver resolver(client.get_executor());
  auto [rec, results] =
      co_await resolver.async_resolve(where->first, std::to_string(where->second), as_tuple_awaitable);
  if (rec) co_return ended("target_down", "target " + name + ": " + rec.message());
  tcp::socket target(client.get_executor());
  auto [cec, ep] = co_await asio::async_connect(target, results, as_tuple_awaitable);
  if (cec) co_return ended(closed_under_us(cec) ? "closed" : "target_down", "target " + name + ": " + cec.message());
  std::error_code ignored;
  target.set_option(tcp::no_delay(true), ignored);
  auto [wec, wn] = co_await asio::async_write(target, asio::buffer(hello), as_tuple_awaitable);
  out.bytes_up += wn;
  if (wec) co_return ended(closed_under_us(wec) ? "closed" : "target_error", "target write: " + wec.message());
  // Either side ending ends both: the watchdog closing the client ends the relay too.
  std::string_view end;
  co_await (pump(client, target, true, out.bytes_up, end) || pump(target, client, false, out.bytes_down, end));
  co_return ended(end, "relayed");
}

}  // namespace vlessbench::reality
