#pragma once
// REALITY's wire facts (docs/configuration.md "REALITY"), pure: the ClientHello record a REALITY
// listener reads before any TLS, the facts it judges (server name, key shares, session id), and
// the text forms of its keys. The cryptography (X25519, HKDF, AES-GCM, HMAC) is BoringSSL's and
// lives in core/net/reality_auth.hpp; this file builds against any TLS library.
//
// A client proves itself inside an ordinary TLS 1.3 ClientHello: its 32-byte legacy session id
// is AES-256-GCM(AuthKey, nonce = client random[20:32], aad = the ClientHello handshake message
// with the session id zeroed) of 16 bytes: client version (3), a zero byte, unix time (uint32,
// big-endian), short id (8). AuthKey = HKDF-SHA256(X25519(server private key, the client's X25519
// share), salt = client random[0:20], info "REALITY").
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/wire/ja4.hpp"
#include "core/wire/parse_result.hpp"

namespace vlessbench::reality {

constexpr std::uint16_t group_x25519 = 0x001d;
constexpr std::uint16_t group_x25519_mlkem768 = 0x11ec;
constexpr std::size_t mlkem768_encapsulation_key = 1184;  // then the 32 bytes of X25519

// The largest ClientHello record read before deciding: one TLS record (RFC 8446: 2^14 bytes of
// body) with its 5-byte header.
constexpr std::size_t max_record = 5 + 16384;

// One TLS handshake record holding a whole ClientHello. complete: value is the handshake message
// (type, 3-byte length, body) and consumed the record's length; need_more: the record is not all
// there yet; invalid: not a TLS handshake record, or a ClientHello spanning records (whose
// connection REALITY hands to its target, as it does any ClientHello it does not accept).
parse_result<std::span<const std::uint8_t>> client_hello_record(std::span<const std::uint8_t> in);

// What REALITY reads of a ClientHello handshake message (4-byte header + body), with offsets into
// the message.
struct hello_facts {
  client_hello hello;
  std::span<const std::uint8_t> message;  // the handshake message
  std::span<const std::uint8_t> random;   // 32 bytes
  std::span<const std::uint8_t> session_id;
  bool tls13 = false;  // supported_versions offers TLS 1.3
  // The X25519 public value REALITY authenticates with: the X25519 share, else the last 32 bytes
  // of an X25519MLKEM768 share (Xray's order); empty when neither is there.
  std::span<const std::uint8_t> x25519;
  // X25519MLKEM768 offered as a key share before any X25519 share (what Xray >= 26.9.8 requires).
  bool mlkem_share_first = false;
};
parse_result<hello_facts> read_hello_facts(std::span<const std::uint8_t> message);

// The IANA name of a TLS group ("X25519", "X25519MLKEM768", "secp256r1", "GREASE", or "0x1234").
std::string group_name(std::uint16_t group);
// A JSON array of group names in their order: ["X25519MLKEM768","X25519"].
std::string group_names_json(std::span<const std::uint16_t> groups);

// The client's plaintext session id: version, time, short id.
struct client_claim {
  std::array<std::uint8_t, 3> version{};
  std::uint32_t unix_time = 0;
  std::array<std::uint8_t, 8> short_id{};
};
client_claim read_claim(std::span<const std::uint8_t, 16> plaintext);

using key32 = std::array<std::uint8_t, 32>;
using short_id = std::array<std::uint8_t, 8>;

// Keys as Xray writes them: base64url without padding (43 characters); padding and the standard
// alphabet are accepted too.
std::string encode_key(const key32& key);
std::optional<key32> decode_key(std::string_view text);

// A short id: 0 to 16 hex digits, an even count; the 8 bytes zero-padded on the right.
std::optional<short_id> parse_short_id(std::string_view hex);

}  // namespace vlessbench::reality

namespace vlessbench::reality {

// A REALITY listener's keys ([[vless]] security = "reality", docs/configuration.md).
struct settings {
  key32 private_key{};                      // X25519
  std::vector<short_id> short_ids;          // a client's must be one of them
  std::vector<std::string> short_ids_text;  // as configured (for links)
  std::vector<std::string> server_names;    // a client's SNI must be one of them
  std::string target;                       // host:port the refused are relayed to; "" = the daemon's HTTPS target
  std::uint32_t max_time_diff_ms = 0;       // 0: any client time
  bool require_mlkem_share = false;         // refuse a ClientHello without X25519MLKEM768 before X25519
  bool key_generated = false;               // private_key was made at start (not in the config)
  bool operator==(const settings&) const = default;
};

// What security = "reality" alone means (the parser's defaults and the embedded default's
// listener): server name www.example.com, the empty short id, any client time, the key left to
// the daemon (key_generated), refused connections to the daemon's HTTPS target.
settings default_settings();

}  // namespace vlessbench::reality
