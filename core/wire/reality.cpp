#include "core/wire/reality.hpp"

#include <algorithm>
#include <cstdio>

#include "core/wire/parse_invalid.hpp"

namespace vlessbench::reality {

namespace {

constexpr std::uint8_t record_handshake = 0x16;
constexpr std::uint8_t handshake_client_hello = 0x01;

}  // namespace

parse_result<std::span<const std::uint8_t>> client_hello_record(std::span<const std::uint8_t> in) {
  using result = parse_result<std::span<const std::uint8_t>>;
  if (!in.empty() && in[0] != record_handshake)
    return parse_invalid<std::span<const std::uint8_t>>("not a TLS handshake");
  if (in.size() < 5) return {};
  if (in[1] != 0x03) return parse_invalid<std::span<const std::uint8_t>>("not a TLS record version");
  const std::size_t length = static_cast<std::size_t>(in[3]) << 8 | in[4];
  if (length > max_record - 5) return parse_invalid<std::span<const std::uint8_t>>("record longer than 16 KiB");
  if (length < 4) return parse_invalid<std::span<const std::uint8_t>>("record too short for a handshake message");
  // The handshake header says early whether the ClientHello fits in this record.
  if (in.size() >= 9) {
    if (in[5] != handshake_client_hello) return parse_invalid<std::span<const std::uint8_t>>("not a ClientHello");
    const std::size_t message = static_cast<std::size_t>(in[6]) << 16 | static_cast<std::size_t>(in[7]) << 8 | in[8];
    if (message + 4 != length)
      return parse_invalid<std::span<const std::uint8_t>>("ClientHello not in exactly one record");
  }
  if (in.size() < 5 + length) return {};
  result r;
  r.status = parse_status::complete;
  r.value = in.subspan(5, length);
  r.consumed = 5 + length;
  return r;
}

parse_result<hello_facts> read_hello_facts(std::span<const std::uint8_t> message) {
  if (message.size() < 4 || message[0] != handshake_client_hello)
    return parse_invalid<hello_facts>("not a ClientHello");
  const auto body = message.subspan(4);
  auto parsed = parse_client_hello(body);
  if (!parsed.complete()) return parse_invalid<hello_facts>(parsed.reason);
  hello_facts f;
  f.hello = std::move(parsed.value);
  f.message = message;
  f.random = message.subspan(4 + 2, 32);
  f.session_id = message.subspan(4 + 2 + 32 + 1, f.hello.session_id_length);
  f.tls13 = std::find(f.hello.supported_versions.begin(), f.hello.supported_versions.end(), std::uint16_t{0x0304}) !=
            f.hello.supported_versions.end();
  std::span<const std::uint8_t> from_mlkem;
  bool seen_x25519 = false;
  for (const auto& share : f.hello.key_shares) {
    const auto data = body.subspan(share.offset, share.length);
    if (share.group == group_x25519 && data.size() == 32 && f.x25519.empty()) f.x25519 = data;
    if (share.group == group_x25519) seen_x25519 = true;
    if (share.group == group_x25519_mlkem768) {
      if (!seen_x25519) f.mlkem_share_first = true;
      if (data.size() == mlkem768_encapsulation_key + 32 && from_mlkem.empty())
        from_mlkem = data.subspan(mlkem768_encapsulation_key);
    }
  }
  if (f.x25519.empty()) f.x25519 = from_mlkem;
  parse_result<hello_facts> r;
  r.status = parse_status::complete;
  r.value = std::move(f);
  r.consumed = message.size();
  return r;
}

std::string group_name(std::uint16_t group) {
  switch (group) {
    case 0x001d: return "X25519";
    case 0x001e: return "X448";
    case 0x0017: return "secp256r1";
    case 0x0018: return "secp384r1";
    case 0x0019: return "secp521r1";
    case 0x11ec: return "X25519MLKEM768";
    case 0x11eb: return "SecP256r1MLKEM768";
    case 0x11ed: return "SecP384r1MLKEM1024";
    case 0x6399: return "X25519Kyber768Draft00";
    case 0x0100: return "ffdhe2048";
    case 0x0101: return "ffdhe3072";
    default: break;
  }
  if (is_grease(group)) return "GREASE";
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%04x", group);
  return buf;
}

std::string group_names_json(std::span<const std::uint16_t> groups) {
  std::string out = "[";
  for (const std::uint16_t g : groups) {
    if (out.size() > 1) out += ',';
    out += '"' + group_name(g) + '"';
  }
  return out + ']';
}

client_claim read_claim(std::span<const std::uint8_t, 16> p) {
  client_claim c;
  std::copy(p.begin(), p.begin() + 3, c.version.begin());
  c.unix_time = static_cast<std::uint32_t>(p[4]) << 24 | static_cast<std::uint32_t>(p[5]) << 16 |
                static_cast<std::uint32_t>(p[6]) << 8 | p[7];
  std::copy(p.begin() + 8, p.end(), c.short_id.begin());
  return c;
}

namespace {
constexpr char url_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

int sextet(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '-' || c == '+') return 62;
  if (c == '_' || c == '/') return 63;
  return -1;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

std::string encode_key(const key32& key) {
  std::string out;
  std::uint32_t acc = 0;
  int bits = 0;
  for (const std::uint8_t b : key) {
    acc = acc << 8 | b;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += url_alphabet[(acc >> bits) & 63];
    }
  }
  if (bits > 0) out += url_alphabet[(acc << (6 - bits)) & 63];
  return out;
}

std::optional<key32> decode_key(std::string_view text) {
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  if (text.size() != 43) return std::nullopt;
  key32 out{};
  std::uint32_t acc = 0;
  int bits = 0;
  std::size_t n = 0;
  for (const char c : text) {
    const int v = sextet(c);
    if (v < 0) return std::nullopt;
    acc = acc << 6 | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[n++] = static_cast<std::uint8_t>(acc >> bits);
    }
  }
  if ((acc & ((1u << bits) - 1)) != 0) return std::nullopt;  // the 4 spare bits must be zero
  return out;
}

std::optional<short_id> parse_short_id(std::string_view hex) {
  if (hex.size() > 16 || hex.size() % 2 != 0) return std::nullopt;
  short_id out{};
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    const int hi = hex_value(hex[i]);
    const int lo = hex_value(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out[i / 2] = static_cast<std::uint8_t>(hi << 4 | lo);
  }
  return out;
}

settings default_settings() {
  settings s;
  s.server_names = {"www.example.com"};
  s.short_ids_text = {""};
  s.short_ids = {short_id{}};
  s.key_generated = true;
  return s;
}

}  // namespace vlessbench::reality
