#include "core/wire/ntp_message.hpp"

namespace vlessbench::ntp {

namespace {

std::uint64_t read_be(std::string_view b, std::size_t at, std::size_t n) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}

void write_be(std::string& out, std::uint64_t v, std::size_t n) {
  for (std::size_t i = n; i-- > 0;) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

std::string format(const packet& p) {
  std::string out;
  out.reserve(header_bytes);
  out.push_back(static_cast<char>(((p.leap & 3) << 6) | ((p.version & 7) << 3) | (p.mode & 7)));
  out.push_back(static_cast<char>(p.stratum));
  out.push_back(static_cast<char>(p.poll));
  out.push_back(static_cast<char>(p.precision));
  write_be(out, 0, 4);         // root delay
  write_be(out, 1U << 10, 4);  // root dispersion: 1/64 s
  write_be(out, p.reference_id, 4);
  write_be(out, p.reference, 8);
  write_be(out, p.origin, 8);
  write_be(out, p.receive, 8);
  write_be(out, p.transmit, 8);
  return out;
}

}  // namespace

parse_result<packet> parse_packet(std::string_view d) {
  parse_result<packet> r;
  r.status = parse_status::invalid;
  if (d.size() < header_bytes) {
    r.reason = "ntp: shorter than the 48-byte header";
    return r;
  }
  packet& p = r.value;
  const auto first = static_cast<unsigned char>(d[0]);
  p.leap = first >> 6;
  p.version = (first >> 3) & 7;
  p.mode = first & 7;
  p.stratum = static_cast<std::uint8_t>(d[1]);
  p.poll = static_cast<std::uint8_t>(d[2]);
  p.precision = static_cast<std::int8_t>(d[3]);
  p.reference_id = static_cast<std::uint32_t>(read_be(d, 12, 4));
  p.reference = read_be(d, 16, 8);
  p.origin = read_be(d, 24, 8);
  p.receive = read_be(d, 32, 8);
  p.transmit = read_be(d, 40, 8);
  if (p.version == 0) {
    r.reason = "ntp: version 0";
    return r;
  }
  r.status = parse_status::complete;
  r.consumed = d.size();
  return r;
}

parse_result<packet> parse_request(std::string_view d) {
  auto r = parse_packet(d);
  if (r.invalid()) return r;
  auto refuse = [&r](std::string_view why) {
    r.status = parse_status::invalid;
    r.consumed = 0;
    r.reason = why;
    return r;
  };
  if (d.size() > max_request_bytes) return refuse("ntp: longer than 1024 bytes (extension fields are not served)");
  if (r.value.version < 3 || r.value.version > 4) return refuse("ntp: version other than 3 or 4");
  if (r.value.mode == mode_server || r.value.mode == 5)
    return refuse("ntp: a server or broadcast packet (an answer is never answered)");
  if (r.value.mode != mode_client) return refuse("ntp: mode other than 3 (client)");
  return r;
}

std::string format_response(const packet& request, std::uint64_t receive, std::uint64_t transmit) {
  packet p;
  p.version = request.version;
  p.mode = mode_server;
  p.stratum = 10;
  p.poll = request.poll;
  p.precision = -20;             // about a microsecond
  p.reference_id = 0x4C4F434CU;  // "LOCL"
  p.reference = receive;
  p.origin = request.transmit;
  p.receive = receive;
  p.transmit = transmit;
  return format(p);
}

std::string format_request(std::uint64_t transmit) {
  packet p;
  p.version = 4;
  p.mode = mode_client;
  p.poll = 6;
  p.transmit = transmit;
  std::string out = format(p);
  // A client sends no root dispersion of its own.
  out[8] = out[9] = out[10] = out[11] = 0;
  return out;
}

std::uint64_t from_unix_ns(std::uint64_t unix_ns) {
  const std::uint64_t seconds = unix_ns / 1'000'000'000ULL + unix_epoch_offset;
  const std::uint64_t frac = ((unix_ns % 1'000'000'000ULL) << 32) / 1'000'000'000ULL;
  return (seconds << 32) | frac;
}

std::uint64_t to_unix_ns(std::uint64_t ntp) {
  if ((ntp >> 32) < unix_epoch_offset) return 0;  // before 1970: not a clock this daemon runs on
  const std::uint64_t seconds = (ntp >> 32) - unix_epoch_offset;
  const std::uint64_t frac_ns = ((ntp & 0xFFFFFFFFULL) * 1'000'000'000ULL) >> 32;
  return seconds * 1'000'000'000ULL + frac_ns;
}

}  // namespace vlessbench::ntp
