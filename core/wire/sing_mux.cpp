#include "core/wire/sing_mux.hpp"

#include <algorithm>

#include "core/wire/parse_invalid.hpp"

namespace vlessbench::sing_mux {

namespace {

std::uint16_t be16(std::string_view in, std::size_t at) {
  return static_cast<std::uint16_t>((static_cast<unsigned char>(in[at]) << 8) | static_cast<unsigned char>(in[at + 1]));
}

void put16(std::string& out, std::size_t v) {
  out.push_back(static_cast<char>((v >> 8) & 0xff));
  out.push_back(static_cast<char>(v & 0xff));
}

}  // namespace

std::string_view to_string(protocol p) {
  switch (p) {
    case protocol::smux: return "smux";
    case protocol::yamux: return "yamux";
    case protocol::h2mux: return "h2mux";
  }
  return "unknown";
}

parse_result<request> parse_request(std::string_view in) {
  parse_result<request> r;
  if (in.size() < 2) return r;
  const auto version = static_cast<std::uint8_t>(in[0]);
  if (version > 1) return parse_invalid<request>("unknown_version");
  const auto proto = static_cast<std::uint8_t>(in[1]);
  if (proto > 2) return parse_invalid<request>("unknown_protocol");
  r.value.version = version;
  r.value.proto = static_cast<protocol>(proto);
  std::size_t at = 2;
  if (version == 1) {
    if (in.size() < 3) return r;
    const auto flag = static_cast<std::uint8_t>(in[2]);
    if (flag > 1) return parse_invalid<request>("bad_padding_flag");
    r.value.padding = flag == 1;
    at = 3;
    if (r.value.padding) {
      if (in.size() < 5) return r;
      at = 5 + be16(in, 3);
      if (in.size() < at) return r;
    }
  }
  r.status = parse_status::complete;
  r.consumed = at;
  return r;
}

std::string encode_request(const request& r, std::uint16_t padding_length) {
  std::string out;
  out.push_back(static_cast<char>(r.version));
  out.push_back(static_cast<char>(r.proto));
  if (r.version == 1) {
    out.push_back(r.padding ? 1 : 0);
    if (r.padding) {
      put16(out, padding_length);
      out.append(padding_length, '\0');
    }
  }
  return out;
}

parse_result<mux::target> parse_socks_address(std::string_view in) {
  parse_result<mux::target> r;
  if (in.empty()) return r;
  std::size_t len = 0, at = 1;
  switch (static_cast<std::uint8_t>(in[0])) {
    case 1:
      r.value.type = mux::address_type::ipv4;
      len = 4;
      break;
    case 4:
      r.value.type = mux::address_type::ipv6;
      len = 16;
      break;
    case 3:
      r.value.type = mux::address_type::domain;
      if (in.size() < 2) return r;
      len = static_cast<std::uint8_t>(in[1]);
      if (len == 0) return parse_invalid<mux::target>("empty_domain");
      at = 2;
      break;
    default: return parse_invalid<mux::target>("unknown_address_type");
  }
  if (in.size() < at + len + 2) return r;
  r.value.address.assign(in.substr(at, len));
  r.value.port = be16(in, at + len);
  r.status = parse_status::complete;
  r.consumed = at + len + 2;
  return r;
}

void encode_socks_address(std::string& out, const mux::target& t) {
  switch (t.type) {
    case mux::address_type::ipv4: out.push_back(1); break;
    case mux::address_type::ipv6: out.push_back(4); break;
    case mux::address_type::domain:
      out.push_back(3);
      out.push_back(static_cast<char>(std::min<std::size_t>(t.address.size(), 255)));
      break;
  }
  out.append(t.address.substr(0, 255));
  put16(out, t.port);
}

parse_result<stream_request> parse_stream_request(std::string_view in) {
  parse_result<stream_request> r;
  if (in.size() < 2) return r;
  const std::uint16_t flags = be16(in, 0);
  if ((flags & ~(flag_udp | flag_addr)) != 0) return parse_invalid<stream_request>("unknown_flags");
  if ((flags & flag_addr) != 0 && (flags & flag_udp) == 0) return parse_invalid<stream_request>("addr_without_udp");
  const auto a = parse_socks_address(in.substr(2));
  if (a.invalid()) return parse_invalid<stream_request>(a.reason);
  if (!a.complete()) return r;
  r.value.dest = a.value;
  r.value.dest.net = (flags & flag_udp) != 0 ? mux::network::udp : mux::network::tcp;
  r.value.packet_addr = (flags & flag_addr) != 0;
  r.status = parse_status::complete;
  r.consumed = 2 + a.consumed;
  return r;
}

std::string encode_stream_request(const stream_request& r) {
  std::string out;
  std::uint16_t flags = r.dest.net == mux::network::udp ? flag_udp : 0;
  if (r.packet_addr) flags |= flag_addr;
  put16(out, flags);
  encode_socks_address(out, r.dest);
  return out;
}

void encode_stream_error(std::string& out, std::string_view message) {
  message = message.substr(0, 255);
  out.push_back(static_cast<char>(status_error));
  // uvarint: seven bits a byte, low first.
  std::size_t n = message.size();
  while (n >= 0x80) {
    out.push_back(static_cast<char>((n & 0x7f) | 0x80));
    n >>= 7;
  }
  out.push_back(static_cast<char>(n));
  out.append(message);
}

parse_result<udp_packet> parse_udp_packet(std::string_view in, bool packet_addr) {
  parse_result<udp_packet> r;
  std::size_t at = 0;
  if (packet_addr) {
    const auto a = parse_socks_address(in);
    if (a.invalid()) return parse_invalid<udp_packet>(a.reason);
    if (!a.complete()) return r;
    r.value.dest = a.value;
    r.value.dest->net = mux::network::udp;
    at = a.consumed;
  }
  if (in.size() < at + 2) return r;
  const std::size_t len = be16(in, at);
  if (in.size() < at + 2 + len) return r;
  r.value.data = in.substr(at + 2, len);
  r.status = parse_status::complete;
  r.consumed = at + 2 + len;
  return r;
}

void encode_udp_packet(std::string& out, const mux::target* dest, std::string_view data) {
  if (dest != nullptr) encode_socks_address(out, *dest);
  put16(out, data.size());
  out.append(data);
}

void unpadder::feed(std::string_view in, std::string& out) {
  while (!in.empty()) {
    if (data_left_ > 0) {
      const std::size_t n = std::min(data_left_, in.size());
      out.append(in.substr(0, n));
      in.remove_prefix(n);
      data_left_ -= n;
      continue;
    }
    if (pad_left_ > 0) {
      const std::size_t n = std::min(pad_left_, in.size());
      in.remove_prefix(n);
      pad_left_ -= n;
      continue;
    }
    if (records_ >= padded_records) {
      out.append(in);
      return;
    }
    const std::size_t n = std::min<std::size_t>(4 - head_.size(), in.size());
    head_.append(in.substr(0, n));
    in.remove_prefix(n);
    if (head_.size() < 4) return;
    data_left_ = be16(head_, 0);
    pad_left_ = be16(head_, 2);
    head_.clear();
    ++records_;
  }
}

void encode_padded_record(std::string& out, std::string_view data, std::uint16_t padding_length) {
  data = data.substr(0, 0xffff);
  put16(out, data.size());
  put16(out, padding_length);
  out.append(data);
  out.append(padding_length, '\0');
}

}  // namespace vlessbench::sing_mux
