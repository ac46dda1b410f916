#include "core/wire/smux_frame.hpp"

#include "core/wire/parse_invalid.hpp"

namespace vlessbench::smux {

namespace {

std::uint32_t le(std::string_view in, std::size_t at, std::size_t n) {
  std::uint32_t v = 0;
  for (std::size_t i = n; i-- > 0;) v = (v << 8) | static_cast<unsigned char>(in[at + i]);
  return v;
}

void put_le(std::string& out, std::uint32_t v, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

}  // namespace

parse_result<frame> parse_frame(std::string_view in) {
  parse_result<frame> r;
  if (in.empty()) return r;
  const auto version = static_cast<std::uint8_t>(in[0]);
  if (version != 1 && version != 2) return parse_invalid<frame>("bad_version");
  if (in.size() < 2) return r;
  const auto c = static_cast<std::uint8_t>(in[1]);
  if (c > static_cast<std::uint8_t>(cmd::upd)) return parse_invalid<frame>("unknown_cmd");
  if (c == static_cast<std::uint8_t>(cmd::upd) && version == 1) return parse_invalid<frame>("upd_in_version_1");
  if (in.size() < header_size) return r;
  const std::size_t len = le(in, 2, 2);
  if (c == static_cast<std::uint8_t>(cmd::upd) && len != 8) return parse_invalid<frame>("bad_upd_length");
  if (in.size() < header_size + len) return r;
  r.value.version = version;
  r.value.c = static_cast<cmd>(c);
  r.value.sid = le(in, 4, 4);
  r.value.data = in.substr(header_size, len);
  if (r.value.c == cmd::upd) {
    r.value.consumed = le(in, header_size, 4);
    r.value.window = le(in, header_size + 4, 4);
  }
  r.status = parse_status::complete;
  r.consumed = header_size + len;
  return r;
}

void encode_frame(std::string& out, std::uint8_t version, cmd c, std::uint32_t sid, std::string_view data) {
  data = data.substr(0, 0xffff);
  out.push_back(static_cast<char>(version));
  out.push_back(static_cast<char>(c));
  put_le(out, static_cast<std::uint32_t>(data.size()), 2);
  put_le(out, sid, 4);
  out.append(data);
}

void encode_upd(std::string& out, std::uint32_t sid, std::uint32_t consumed, std::uint32_t window) {
  std::string body;
  put_le(body, consumed, 4);
  put_le(body, window, 4);
  encode_frame(out, 2, cmd::upd, sid, body);
}

}  // namespace vlessbench::smux
