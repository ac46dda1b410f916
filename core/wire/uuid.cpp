#include "core/wire/uuid.hpp"

#include <stdexcept>

#include <openssl/rand.h>

namespace vlessbench::vless {

bool uuid_equal(const uuid_bytes& a, const uuid_bytes& b) {
  // Accumulate every difference so the time taken does not reveal how many leading bytes match.
  volatile std::uint8_t diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff = diff | static_cast<std::uint8_t>(a[i] ^ b[i]);
  return diff == 0;
}

std::optional<uuid_bytes> parse_uuid(std::string_view text) {
  if (text.size() != 36) return std::nullopt;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  uuid_bytes u{};
  std::size_t out = 0;
  for (std::size_t i = 0; i < text.size();) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (text[i] != '-') return std::nullopt;
      ++i;
      continue;
    }
    const int hi = hex(text[i]);
    const int lo = hex(text[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    u[out++] = static_cast<std::uint8_t>(hi << 4 | lo);
    i += 2;
  }
  return u;
}

std::string format_uuid(const uuid_bytes& u) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s;
  s.reserve(36);
  for (std::size_t i = 0; i < u.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s.push_back('-');
    s.push_back(digits[u[i] >> 4]);
    s.push_back(digits[u[i] & 0x0f]);
  }
  return s;
}

uuid_bytes random_uuid() {
  uuid_bytes u{};
  if (RAND_bytes(u.data(), u.size()) != 1) throw std::runtime_error("RAND_bytes failed");
  u[6] = static_cast<std::uint8_t>((u[6] & 0x0f) | 0x40);  // version 4
  u[8] = static_cast<std::uint8_t>((u[8] & 0x3f) | 0x80);  // RFC 4122 variant
  return u;
}

}  // namespace vlessbench::vless
