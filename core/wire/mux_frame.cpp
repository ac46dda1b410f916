#include "core/wire/mux_frame.hpp"

namespace vlessbench::mux {

namespace {

std::uint16_t u16(std::string_view s, std::size_t at) {
  return static_cast<std::uint16_t>((static_cast<unsigned char>(s[at]) << 8) | static_cast<unsigned char>(s[at + 1]));
}

void put_u16(std::string& out, std::uint16_t v) {
  out += static_cast<char>(v >> 8);
  out += static_cast<char>(v & 0xff);
}

parse_result<frame> invalid(std::string_view reason) {
  parse_result<frame> r;
  r.status = parse_status::invalid;
  r.reason = reason;
  return r;
}

// The target at meta[at...]: its size, or 0 with reason set.
std::size_t parse_target(std::string_view meta, std::size_t at, target& t, std::string_view& reason) {
  if (meta.size() < at + 4) {
    reason = "bad_metadata_length";
    return 0;
  }
  const auto net = static_cast<unsigned char>(meta[at]);
  if (net != 1 && net != 2) {
    reason = "unknown_network";
    return 0;
  }
  t.net = static_cast<network>(net);
  t.port = u16(meta, at + 1);
  if (t.port == 0) {
    reason = "port_zero";
    return 0;
  }
  const auto type = static_cast<unsigned char>(meta[at + 3]);
  std::size_t len = 0;
  std::size_t skip = 0;
  switch (type) {
    case 1: len = 4; break;
    case 3: len = 16; break;
    case 2:
      if (meta.size() < at + 5) {
        reason = "bad_metadata_length";
        return 0;
      }
      len = static_cast<unsigned char>(meta[at + 4]);
      skip = 1;
      if (len == 0) {
        reason = "empty_domain";
        return 0;
      }
      break;
    default: reason = "unknown_address_type"; return 0;
  }
  t.type = static_cast<address_type>(type);
  const std::size_t start = at + 4 + skip;
  if (meta.size() < start + len) {
    reason = "bad_metadata_length";
    return 0;
  }
  t.address.assign(meta.substr(start, len));
  return 4 + skip + len;
}

}  // namespace

parse_result<frame> parse_mux_frame(std::string_view in) {
  parse_result<frame> r;
  if (in.size() < 2) return r;
  const std::size_t meta_len = u16(in, 0);
  if (meta_len < 4) return invalid("metadata_too_short");
  if (meta_len > max_metadata) return invalid("metadata_too_long");
  if (in.size() < 2 + meta_len) return r;
  const std::string_view meta = in.substr(2, meta_len);
  frame& f = r.value;
  f.id = u16(meta, 0);
  const auto st = static_cast<unsigned char>(meta[2]);
  if (st < 1 || st > 4) return invalid("unknown_status");
  f.st = static_cast<status>(st);
  f.option = static_cast<unsigned char>(meta[3]);
  if ((f.option & ~(option_data | option_error)) != 0) return invalid("unknown_option_bits");

  std::size_t at = 4;
  std::string_view reason;
  if (f.st == status::new_sub || (f.st == status::keep && meta_len > 4)) {
    if (f.st == status::new_sub && meta_len == 4) return invalid("new_without_target");
    target t;
    const std::size_t n = parse_target(meta, at, t, reason);
    if (n == 0) return invalid(reason);
    at += n;
    if (f.st == status::new_sub && meta_len - at == 8) {
      if (t.net != network::udp) return invalid("global_id_on_tcp");
      std::array<std::uint8_t, 8> id{};
      for (std::size_t i = 0; i < 8; ++i) id[i] = static_cast<unsigned char>(meta[at + i]);
      f.global_id = id;
      at += 8;
    }
    f.dest = std::move(t);
  }
  if (at != meta_len) return invalid("bad_metadata_length");

  std::size_t size = 2 + meta_len;
  if (f.has_data()) {
    if (in.size() < size + 2) return r;
    const std::size_t data_len = u16(in, size);
    if (in.size() < size + 2 + data_len) return r;
    f.data = in.substr(size + 2, data_len);
    size += 2 + data_len;
  }
  r.status = parse_status::complete;
  r.consumed = size;
  return r;
}

void encode_mux_frame(std::string& out, const frame& f) {
  std::string meta;
  put_u16(meta, f.id);
  meta += static_cast<char>(f.st);
  meta += static_cast<char>(f.option);
  if (f.dest) {
    meta += static_cast<char>(f.dest->net);
    put_u16(meta, f.dest->port);
    meta += static_cast<char>(f.dest->type);
    if (f.dest->type == address_type::domain) meta += static_cast<char>(f.dest->address.size());
    meta += f.dest->address;
  }
  if (f.global_id) meta.append(reinterpret_cast<const char*>(f.global_id->data()), f.global_id->size());
  put_u16(out, static_cast<std::uint16_t>(meta.size()));
  out += meta;
  if (f.has_data()) {
    const std::string_view data = f.data.substr(0, 0xffff);
    put_u16(out, static_cast<std::uint16_t>(data.size()));
    out += data;
  }
}

}  // namespace vlessbench::mux
