#pragma once
// The JA4 TLS client fingerprint (FoxIO's published definition, technical_details/JA4.md in
// github.com/FoxIO-LLC/ja4; docs/sessions.md "Client fingerprint"), from a ClientHello:
//
//   t13d1516h2_8daaf6152771_e5627efa2ab1
//   │ │ │ │ │ │  │            └ sha256 of the sorted extensions (SNI and ALPN left out),
//   │ │ │ │ │ │  │              "_", the signature algorithms in their order; first 12 hex
//   │ │ │ │ │ │  └ sha256 of the sorted cipher suites, first 12 hex
//   │ │ │ │ │ └ first and last character of the first ALPN value ("00": none)
//   │ │ │ │ └ extension count, │ └ cipher count (two digits, at most 99)
//   │ │ └ "d": SNI sent, "i": none
//   │ └ highest version in supported_versions, else the legacy version ("13", "12", ...)
//   └ "t": TLS over TCP ("q" QUIC, "d" DTLS)
//
// GREASE values (RFC 8701) are left out everywhere. The parser is pure: the ClientHello body
// (what follows the 4-byte handshake header: legacy version, random, session id, cipher suites,
// compression methods, extensions) in, the fields JA4 reads or a reason out. It never reads past
// the input and refuses trailing bytes, as a TLS stack does.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/wire/parse_result.hpp"

namespace vlessbench {

// A key_share entry (extension 0x0033): its group and where its key exchange bytes lie in the body.
struct key_share_entry {
  std::uint16_t group = 0;
  std::size_t offset = 0;  // into the ClientHello body
  std::size_t length = 0;
};

struct client_hello {
  std::uint16_t legacy_version = 0;
  std::size_t session_id_length = 0;  // the session id lies at body offset 35 (after version, random, its length)
  std::string server_name;            // the first host_name of extension 0x0000 ("" when none)
  std::vector<std::uint16_t> supported_groups;      // extension 0x000a, in their order, GREASE included
  std::vector<key_share_entry> key_shares;          // extension 0x0033, in their order, GREASE included
  std::vector<std::uint16_t> cipher_suites;         // as sent, GREASE included
  std::vector<std::uint16_t> extensions;            // extension types as sent, GREASE included
  std::vector<std::uint16_t> supported_versions;    // extension 0x002b, empty when absent
  std::vector<std::uint16_t> signature_algorithms;  // extension 0x000d, in their order
  std::string alpn_first;                           // first protocol of extension 0x0010
  bool has_sni = false;                             // extension 0x0000 present
};

// RFC 8701 GREASE: 0x0a0a, 0x1a1a, ..., 0xfafa.
constexpr bool is_grease(std::uint16_t v) { return (v & 0x0f0f) == 0x0a0a && (v >> 8) == (v & 0xff); }

// complete (consumed == body.size()) or invalid with a reason; never need_more: the TLS stack
// hands over a whole ClientHello.
parse_result<client_hello> parse_client_hello(std::span<const std::uint8_t> body);

enum class ja4_protocol : char { tcp = 't', quic = 'q', dtls = 'd' };

// The fingerprint: always 36 characters.
std::string ja4_fingerprint(const client_hello& hello, ja4_protocol protocol = ja4_protocol::tcp);

// parse + fingerprint of a TLS-over-TCP ClientHello body: the JA4, or "" with reason set when the
// parser refused it (reason may be nullptr).
std::string ja4_of_client_hello(std::span<const std::uint8_t> body, std::string_view* reason = nullptr);

}  // namespace vlessbench
