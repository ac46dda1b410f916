#pragma once
// REALITY's server half on BoringSSL (docs/configuration.md "REALITY"): the client's proof checked
// (core/wire/reality.hpp says what it is), the per-connection certificate a REALITY client
// accepts, and the TLS context a REALITY listener hands to BoringSSL once a ClientHello passed.
#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/net/asio_compat.hpp"
#include "core/wire/reality.hpp"

namespace vlessbench::reality {

// Why a ClientHello was not served: every one is relayed to the target (a prober sees the
// target's site). The reject reason is to_string's, the detail says more.
enum class refusal {
  none,
  bad_client_hello,  // not one whole ClientHello in one record
  not_tls13,         // supported_versions without TLS 1.3
  server_name,       // SNI not in server_names
  no_x25519_share,   // neither an X25519 nor an X25519MLKEM768 share
  mlkem_required,    // require_mlkem_share, and no X25519MLKEM768 share before X25519
  auth_failed,       // the session id does not open: another key, or not a REALITY client
  unknown_short_id,  // an unknown short id
  time_diff,         // client time further than max_time_diff from ours
  replayed,          // this client random / session id was seen recently
};
std::string_view to_string(refusal r);  // "reality_server_name", ...

struct auth_outcome {
  refusal why = refusal::none;
  std::string detail;
  key32 auth_key{};
  client_claim claim;
};

// Judges one ClientHello (read_hello_facts's) against the listener's settings at now_ms (unix).
// Pure but for the cryptography; the replay memory is the caller's (replay_memory).
auth_outcome authenticate(const settings& s, const hello_facts& f, std::int64_t now_ms);

// The public key of a private one (what links carry as pbk=) and a fresh key.
key32 public_key(const key32& private_key);
key32 generate_private_key();

// The client randoms of recent accepted hellos, bounded in count: a second use is a replay.
class replay_memory {
 public:
  explicit replay_memory(std::size_t capacity) : capacity_(capacity) {}
  // True the first time a random is seen (it is remembered), false after.
  bool first_use(std::span<const std::uint8_t> random);

 private:
  std::mutex mutex_;
  std::size_t capacity_;
  std::set<std::array<std::uint8_t, 32>> seen_;
  std::deque<std::array<std::uint8_t, 32>> order_;
};

// One REALITY listener's state, shared by its connections (on any thread).
class listener_state {
 public:
  explicit listener_state(settings s);
  const settings& config() const { return settings_; }
  replay_memory& replays() { return replays_; }
  // The certificate for a connection whose AuthKey is auth_key: an ed25519 certificate whose
  // signature field is HMAC-SHA512(auth_key, its public key), DER.
  std::vector<std::uint8_t> certificate_for(const key32& auth_key) const;
  EVP_PKEY* signing_key() const { return ed25519_key_.get(); }
  // Where refused connections go: the configured target, or the daemon's HTTPS target once bound.
  void set_fallback(std::string host, std::uint16_t port);
  std::optional<std::pair<std::string, std::uint16_t>> fallback() const;

 private:
  settings settings_;
  replay_memory replays_{4096};
  std::array<std::uint8_t, 32> ed25519_public_{};
  std::shared_ptr<EVP_PKEY> ed25519_key_;
  std::vector<std::uint8_t> certificate_template_;
  mutable std::mutex fallback_mutex_;
  std::optional<std::pair<std::string, std::uint16_t>> fallback_;
};

// A REALITY listener's TLS context: TLS 1.3 only, ALPN as the daemon's, no certificate of its own
// (each connection gets certificate_for's); it keeps state alive. Every ClientHello's JA4 and key
// shares are recorded as on the daemon's context.
asio::ssl::context make_context(std::shared_ptr<listener_state> state);
// The listener state of a connection made from make_context's context; nullptr for plain TLS.
listener_state* state_of(SSL* ssl);
// Gives an accepted connection its certificate and lets BoringSSL sign with ed25519 as REALITY
// servers do (the client checks that key, whatever signature algorithms its ClientHello lists).
bool use_certificate(SSL* ssl, const listener_state& state, const key32& auth_key);

}  // namespace vlessbench::reality
