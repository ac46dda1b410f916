#include "core/wire/vless_codec.hpp"

#include <algorithm>
#include <stdexcept>

#include <openssl/rand.h>

namespace vlessbench::vless {

namespace {

constexpr std::uint8_t version = 0;
constexpr std::size_t uuid_size = 16;

parse_result<request_header> invalid_request(std::string_view reason) {
  parse_result<request_header> r;
  r.status = parse_status::invalid;
  r.reason = reason;
  return r;
}

std::uint8_t byte_at(std::string_view s, std::size_t i) { return static_cast<std::uint8_t>(s[i]); }

// Hostnames never contain these; letting them through would put them in logs and DNS queries.
bool bad_domain_byte(std::uint8_t c) { return c <= 0x20 || c == 0x7f; }

// proto3 rejects strings that are not UTF-8, so Xray-core would refuse such a flow too.
bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const std::uint8_t c = byte_at(s, i);
    std::size_t extra = 0;
    std::uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      extra = 1;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      extra = 2;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      extra = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (extra >= s.size() - i) return false;
    for (std::size_t k = 1; k <= extra; ++k) {
      const std::uint8_t cc = byte_at(s, i + k);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    static constexpr std::uint32_t min_for_length[] = {0, 0x80, 0x800, 0x10000};
    if (cp < min_for_length[extra] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += extra + 1;
  }
  return true;
}

// Protobuf varint: at most 10 bytes, and the 10th may only carry the top bit of a uint64.
bool read_varint(std::string_view s, std::size_t& pos, std::uint64_t& out) {
  out = 0;
  for (unsigned i = 0; i < 10; ++i) {
    if (pos >= s.size()) return false;
    const std::uint8_t b = byte_at(s, pos++);
    if (i == 9 && b > 1) return false;
    out |= static_cast<std::uint64_t>(b & 0x7f) << (7 * i);
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

void write_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// The Addons message: { string flow = 1; bytes seed = 2; }. Unknown fields and known fields with
// an unexpected wire type are skipped, as protobuf does; groups (deprecated) are refused.
bool parse_addons(std::string_view addons, std::string& flow) {
  constexpr std::uint64_t max_field_number = (1u << 29) - 1;
  std::size_t pos = 0;
  while (pos < addons.size()) {
    std::uint64_t tag = 0;
    if (!read_varint(addons, pos, tag)) return false;
    const std::uint64_t field = tag >> 3;
    const unsigned wire_type = static_cast<unsigned>(tag & 7);
    if (field == 0 || field > max_field_number) return false;
    switch (wire_type) {
      case 0: {
        std::uint64_t ignored = 0;
        if (!read_varint(addons, pos, ignored)) return false;
        break;
      }
      case 1:
        if (addons.size() - pos < 8) return false;
        pos += 8;
        break;
      case 5:
        if (addons.size() - pos < 4) return false;
        pos += 4;
        break;
      case 2: {
        std::uint64_t len = 0;
        if (!read_varint(addons, pos, len)) return false;
        if (len > addons.size() - pos) return false;
        const auto value = addons.substr(pos, static_cast<std::size_t>(len));
        pos += static_cast<std::size_t>(len);
        if (field == 1) {
          if (!valid_utf8(value)) return false;
          flow.assign(value);  // last one wins, as for any proto3 scalar
        }
        break;
      }
      default: return false;
    }
  }
  return true;
}

}  // namespace

parse_result<request_header> parse_request(std::string_view buffer) {
  parse_result<request_header> r;  // need_more until proven otherwise
  std::size_t pos = 0;

  if (buffer.empty()) return r;
  if (byte_at(buffer, 0) != version) return invalid_request("bad_version");
  pos = 1;

  if (buffer.size() < pos + uuid_size + 1) return r;
  for (std::size_t i = 0; i < uuid_size; ++i) r.value.uuid[i] = byte_at(buffer, pos + i);
  pos += uuid_size;

  const std::size_t addons_len = byte_at(buffer, pos++);
  if (buffer.size() < pos + addons_len) return r;
  if (!parse_addons(buffer.substr(pos, addons_len), r.value.flow)) return invalid_request("bad_addons");
  pos += addons_len;

  if (buffer.size() < pos + 1) return r;
  r.value.command = byte_at(buffer, pos++);
  if (r.value.command == static_cast<std::uint8_t>(command::mux)) {
    r.value.dest.port = 0;
    r.value.dest.type = address_type::domain;
    r.value.dest.address = mux_domain;
    r.status = parse_status::complete;
    r.consumed = pos;
    return r;
  }

  if (buffer.size() < pos + 3) return r;
  if (r.value.command == static_cast<std::uint8_t>(command::udp)) r.value.dest.net = network::udp;
  r.value.dest.port = static_cast<std::uint16_t>(byte_at(buffer, pos) << 8 | byte_at(buffer, pos + 1));
  pos += 2;
  const std::uint8_t atyp = byte_at(buffer, pos++);
  switch (atyp) {
    case static_cast<std::uint8_t>(address_type::ipv4):
    case static_cast<std::uint8_t>(address_type::ipv6): {
      r.value.dest.type = static_cast<address_type>(atyp);
      const std::size_t n = r.value.dest.type == address_type::ipv4 ? 4 : 16;
      if (buffer.size() < pos + n) return r;
      r.value.dest.address.assign(buffer.substr(pos, n));
      pos += n;
      break;
    }
    case static_cast<std::uint8_t>(address_type::domain): {
      r.value.dest.type = address_type::domain;
      if (buffer.size() < pos + 1) return r;
      const std::size_t n = byte_at(buffer, pos++);
      if (n == 0) return invalid_request("empty_domain");
      // Reject on the first bad byte seen, without waiting for the rest of the name.
      const std::size_t have = std::min(n, buffer.size() - pos);
      for (std::size_t i = 0; i < have; ++i)
        if (bad_domain_byte(byte_at(buffer, pos + i))) return invalid_request("bad_domain");
      if (have < n) return r;
      r.value.dest.address.assign(buffer.substr(pos, n));
      pos += n;
      break;
    }
    default: return invalid_request("bad_address_type");
  }

  r.status = parse_status::complete;
  r.consumed = pos;
  return r;
}

std::string encode_request(const request_header& h) {
  std::string addons;
  if (!h.flow.empty()) {
    if (!valid_utf8(h.flow)) throw std::invalid_argument("vless flow is not UTF-8");
    addons.push_back(static_cast<char>(1 << 3 | 2));  // field 1, length-delimited
    write_varint(addons, h.flow.size());
    addons += h.flow;
    if (addons.size() > 255) throw std::invalid_argument("vless flow too long for the addons length byte");
  }

  std::string out;
  out.reserve(1 + uuid_size + 1 + addons.size() + 4 + 256);
  out.push_back(static_cast<char>(version));
  for (auto b : h.uuid) out.push_back(static_cast<char>(b));
  out.push_back(static_cast<char>(addons.size()));
  out += addons;
  out.push_back(static_cast<char>(h.command));
  if (h.command == static_cast<std::uint8_t>(command::mux)) return out;

  const destination& d = h.dest;
  out.push_back(static_cast<char>(d.port >> 8));
  out.push_back(static_cast<char>(d.port & 0xff));
  out.push_back(static_cast<char>(d.type));
  switch (d.type) {
    case address_type::ipv4:
    case address_type::ipv6:
      if (d.address.size() != (d.type == address_type::ipv4 ? 4u : 16u))
        throw std::invalid_argument("vless address must be 4 (IPv4) or 16 (IPv6) bytes");
      out += d.address;
      break;
    case address_type::domain:
      if (d.address.empty() || d.address.size() > 255) throw std::invalid_argument("vless domain must be 1..255 bytes");
      for (char c : d.address)
        if (bad_domain_byte(static_cast<std::uint8_t>(c)))
          throw std::invalid_argument("vless domain contains a control or space byte");
      out.push_back(static_cast<char>(d.address.size()));
      out += d.address;
      break;
    default: throw std::invalid_argument("vless address type must be ipv4, domain or ipv6");
  }
  return out;
}

parse_result<std::size_t> parse_response(std::string_view buffer) {
  parse_result<std::size_t> r;
  if (buffer.empty()) return r;
  if (byte_at(buffer, 0) != version) {
    r.status = parse_status::invalid;
    r.reason = "bad_version";
    return r;
  }
  if (buffer.size() < 2) return r;
  const std::size_t addons_len = byte_at(buffer, 1);
  if (buffer.size() < 2 + addons_len) return r;
  r.status = parse_status::complete;
  r.value = addons_len;
  r.consumed = 2 + addons_len;
  return r;
}

}  // namespace vlessbench::vless
