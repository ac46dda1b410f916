#include "core/wire/stun_message.hpp"

#include <algorithm>

namespace vlessbench::stun {

namespace {

constexpr std::uint32_t fingerprint_xor = 0x5354554EU;
constexpr std::size_t max_software = 763;  // RFC 8489 §14.14: fewer than 128 characters, 763 bytes

std::uint32_t read_be(std::string_view b, std::size_t at, std::size_t n) {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < n; ++i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}

void write_be(std::string& out, std::uint32_t v, std::size_t n) {
  for (std::size_t i = n; i-- > 0;) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

void put_be(std::string& out, std::size_t at, std::uint32_t v, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[at + i] = static_cast<char>((v >> (8 * (n - 1 - i))) & 0xFF);
}

std::size_t padded(std::size_t n) { return (n + 3) & ~std::size_t{3}; }

// Comprehension-required attributes a Binding request may carry that the server reads or may ignore.
bool known_required(std::uint16_t type) {
  switch (type) {
    case 0x0003:  // CHANGE-REQUEST (RFC 5780), checked below
    case 0x0006:  // USERNAME
    case 0x0008:  // MESSAGE-INTEGRITY
    case 0x001C:  // MESSAGE-INTEGRITY-SHA256
    case 0x0024:  // PRIORITY (ICE)
    case 0x0025:  // USE-CANDIDATE (ICE)
    case 0x0026:  // PADDING (RFC 5780)
      return true;
    default: return false;
  }
}

struct header {
  std::uint16_t type = 0;
  std::size_t length = 0;
};

// The checks every message gets: reason empty when the header is sound.
std::string_view check_header(std::string_view d, header& h) {
  if (d.size() < header_bytes) return "stun: shorter than the 20-byte header";
  if (d.size() > max_request_bytes) return "stun: longer than 1024 bytes";
  h.type = static_cast<std::uint16_t>(read_be(d, 0, 2));
  h.length = read_be(d, 2, 2);
  if ((h.type & 0xC000) != 0) return "stun: not a STUN message (top bits set)";
  if (read_be(d, 4, 4) != magic_cookie) return "stun: no magic cookie (RFC 3489's classic STUN is not served)";
  if (h.length != d.size() - header_bytes || h.length % 4 != 0) return "stun: length field is not the datagram's";
  return {};
}

std::string_view check_attributes(std::string_view d, request& req) {
  std::size_t at = header_bytes;
  while (at < d.size()) {
    if (req.fingerprint) return "stun: an attribute after FINGERPRINT";
    if (d.size() - at < 4) return "stun: an attribute runs past the end";
    const auto type = static_cast<std::uint16_t>(read_be(d, at, 2));
    const std::size_t len = read_be(d, at + 2, 2);
    if (padded(len) > d.size() - at - 4) return "stun: an attribute runs past the end";
    if (type == attr_fingerprint) {
      if (len != 4) return "stun: FINGERPRINT is not 4 bytes";
      if ((crc32(d.substr(0, at)) ^ fingerprint_xor) != read_be(d, at + 4, 4))
        return "stun: FINGERPRINT does not match";
      req.fingerprint = true;
    } else if (type == 0x0027) {
      return "stun: RESPONSE-PORT (answers go to the source only)";
    } else if (type == attr_change_request) {
      if (len != 4) return "stun: CHANGE-REQUEST is not 4 bytes";
      if ((read_be(d, at + 4, 4) & 0x6) != 0) return "stun: CHANGE-REQUEST asks for another address or port";
    } else if (type < 0x8000 && !known_required(type)) {
      return "stun: an unknown attribute the server must understand";
    }
    at += 4 + padded(len);
  }
  return {};
}

}  // namespace

std::uint32_t crc32(std::string_view bytes) {
  std::uint32_t c = 0xFFFFFFFFU;
  for (const char ch : bytes) {
    c ^= static_cast<unsigned char>(ch);
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320U & (0U - (c & 1U)));
  }
  return ~c;
}

parse_result<request> parse_request(std::string_view d) {
  parse_result<request> r;
  r.status = parse_status::invalid;
  header h;
  if (const auto why = check_header(d, h); !why.empty()) {
    r.reason = why;
    return r;
  }
  const int cls = ((h.type >> 7) & 2) | ((h.type >> 4) & 1);
  const int method = (h.type & 0xF) | ((h.type >> 1) & 0x70) | ((h.type >> 2) & 0xF80);
  if (cls >= 2) {
    r.reason = "stun: a response (never answered)";
    return r;
  }
  if (cls == 1) {
    r.reason = "stun: an indication (never answered)";
    return r;
  }
  if (method != 1) {
    r.reason = "stun: a method other than Binding";
    return r;
  }
  std::copy_n(d.begin() + 8, 12, r.value.id.begin());
  if (const auto why = check_attributes(d, r.value); !why.empty()) {
    r.reason = why;
    return r;
  }
  r.status = parse_status::complete;
  r.consumed = d.size();
  return r;
}

std::string format_response(const request& req, const mapped_address& mapped, std::string_view software,
                            std::size_t max_size) {
  const std::size_t addr_len = mapped.v6 ? 20 : 8;
  const std::size_t tail = req.fingerprint ? 8 : 0;
  const std::size_t base = header_bytes + 4 + addr_len + tail;
  if (max_size != 0 && base > max_size) return {};
  std::string soft = std::string(software_prefix).append(software);
  if (soft.size() > max_software || (max_size != 0 && base + 4 + padded(soft.size()) > max_size)) soft.clear();

  std::string out;
  write_be(out, binding_success, 2);
  write_be(out, 0, 2);  // the length, below
  write_be(out, magic_cookie, 4);
  out.append(reinterpret_cast<const char*>(req.id.data()), req.id.size());
  write_be(out, attr_xor_mapped_address, 2);
  write_be(out, static_cast<std::uint32_t>(addr_len), 2);
  out.push_back(0);
  out.push_back(mapped.v6 ? 2 : 1);
  write_be(out, mapped.port ^ (magic_cookie >> 16), 2);
  std::array<std::uint8_t, 16> mask{};
  for (int i = 0; i < 4; ++i) mask[i] = static_cast<std::uint8_t>(magic_cookie >> (24 - 8 * i));
  std::copy(req.id.begin(), req.id.end(), mask.begin() + 4);
  for (std::size_t i = 0; i < (mapped.v6 ? 16U : 4U); ++i) out.push_back(static_cast<char>(mapped.bytes[i] ^ mask[i]));
  if (!soft.empty()) {
    write_be(out, attr_software, 2);
    write_be(out, static_cast<std::uint32_t>(soft.size()), 2);
    out.append(soft).append(padded(soft.size()) - soft.size(), ' ');
  }
  put_be(out, 2, static_cast<std::uint32_t>(out.size() + tail - header_bytes), 2);
  if (req.fingerprint) {
    const std::uint32_t crc = crc32(out) ^ fingerprint_xor;
    write_be(out, attr_fingerprint, 2);
    write_be(out, 4, 2);
    write_be(out, crc, 4);
  }
  return out;
}

std::string format_request(const transaction_id& id, std::size_t min_size) {
  std::string out;
  write_be(out, binding_request, 2);
  write_be(out, 0, 2);
  write_be(out, magic_cookie, 4);
  out.append(reinterpret_cast<const char*>(id.data()), id.size());
  if (min_size > header_bytes) {
    const std::size_t pad = padded(min_size - std::min(min_size, header_bytes + 4));
    write_be(out, attr_padding, 2);
    write_be(out, static_cast<std::uint32_t>(pad), 2);
    out.append(pad, '\0');
  }
  put_be(out, 2, static_cast<std::uint32_t>(out.size() - header_bytes), 2);
  return out;
}

parse_result<response> parse_response(std::string_view d) {
  parse_result<response> r;
  r.status = parse_status::invalid;
  header h;
  if (const auto why = check_header(d, h); !why.empty()) {
    r.reason = why;
    return r;
  }
  if (h.type != binding_success) {
    r.reason = "stun: not a Binding success response";
    return r;
  }
  std::copy_n(d.begin() + 8, 12, r.value.id.begin());
  bool mapped = false;
  for (std::size_t at = header_bytes; at < d.size();) {
    if (d.size() - at < 4) break;
    const auto type = static_cast<std::uint16_t>(read_be(d, at, 2));
    const std::size_t len = read_be(d, at + 2, 2);
    if (padded(len) > d.size() - at - 4) {
      r.reason = "stun: an attribute runs past the end";
      return r;
    }
    const std::string_view value = d.substr(at + 4, len);
    if (type == attr_xor_mapped_address && (len == 8 || len == 20)) {
      auto& m = r.value.mapped;
      m.v6 = len == 20;
      m.port = static_cast<std::uint16_t>(read_be(value, 2, 2) ^ (magic_cookie >> 16));
      std::array<std::uint8_t, 16> mask{};
      for (int i = 0; i < 4; ++i) mask[i] = static_cast<std::uint8_t>(magic_cookie >> (24 - 8 * i));
      std::copy(r.value.id.begin(), r.value.id.end(), mask.begin() + 4);
      for (std::size_t i = 0; i < len - 4; ++i)
        m.bytes[i] = static_cast<std::uint8_t>(static_cast<unsigned char>(value[4 + i]) ^ mask[i]);
      mapped = true;
    } else if (type == attr_software && value.substr(0, software_prefix.size()) == software_prefix) {
      r.value.software = std::string(value.substr(software_prefix.size()));
    }
    at += 4 + padded(len);
  }
  if (!mapped) {
    r.reason = "stun: no XOR-MAPPED-ADDRESS";
    return r;
  }
  r.status = parse_status::complete;
  r.consumed = d.size();
  return r;
}

}  // namespace vlessbench::stun
