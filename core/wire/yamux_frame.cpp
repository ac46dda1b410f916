#include "core/wire/yamux_frame.hpp"

#include "core/wire/parse_invalid.hpp"

namespace vlessbench::yamux {

namespace {

std::uint32_t be(std::string_view in, std::size_t at, std::size_t n) {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < n; ++i) v = (v << 8) | static_cast<unsigned char>(in[at + i]);
  return v;
}

void put_be(std::string& out, std::uint32_t v, std::size_t n) {
  for (std::size_t i = n; i-- > 0;) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

}  // namespace

parse_result<frame> parse_frame(std::string_view in, std::uint32_t max_data) {
  parse_result<frame> r;
  if (in.empty()) return r;
  if (in[0] != 0) return parse_invalid<frame>("bad_version");
  if (in.size() < 2) return r;
  if (static_cast<std::uint8_t>(in[1]) > static_cast<std::uint8_t>(type::go_away))
    return parse_invalid<frame>("unknown_type");
  if (in.size() < header_size) return r;
  frame& f = r.value;
  f.t = static_cast<type>(in[1]);
  f.flags = static_cast<std::uint16_t>(be(in, 2, 2));
  f.stream = be(in, 4, 4);
  f.length = be(in, 8, 4);
  if ((f.flags & ~(flag_syn | flag_ack | flag_fin | flag_rst)) != 0) return parse_invalid<frame>("unknown_flags");
  const bool session_frame = f.t == type::ping || f.t == type::go_away;
  if (session_frame && f.stream != 0) return parse_invalid<frame>("session_frame_on_stream");
  if (!session_frame && f.stream == 0) return parse_invalid<frame>("stream_zero");
  std::size_t total = header_size;
  if (f.t == type::data) {
    if (f.length > max_data) return parse_invalid<frame>("data_too_long");
    total += f.length;
    if (in.size() < total) return r;
    f.data = in.substr(header_size, f.length);
  }
  r.status = parse_status::complete;
  r.consumed = total;
  return r;
}

void encode_frame(std::string& out, type t, std::uint16_t flags, std::uint32_t stream, std::uint32_t length,
                  std::string_view data) {
  out.push_back(0);
  out.push_back(static_cast<char>(t));
  put_be(out, flags, 2);
  put_be(out, stream, 4);
  put_be(out, length, 4);
  if (t == type::data) out.append(data.substr(0, length));
}

}  // namespace vlessbench::yamux
