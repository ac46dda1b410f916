// libFuzzer target for XHTTP's request parsing: the head (classify, after the HTTP/1.1 head
// parser with chunked bodies allowed), a chunked body fed in random splits, and the packet-up
// order. Invariants: consumed never exceeds the input; an invalid result has a reason; a
// complete classification's padding is within the range and its kind is one the mode allows;
// a chunked body decodes the same whole and split, never past its room; the order never holds
// more than its bounds.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/wire/http_parser.hpp"
#include "core/wire/xhttp_request.hpp"

using namespace vlessbench;

namespace {

void check_head(std::string_view input) {
  const auto head = http::parse_request(input, http::body_framing::chunked_too);
  if (head.consumed > input.size()) __builtin_trap();
  if (!head.complete()) return;
  for (auto m : {xhttp::mode::any, xhttp::mode::packet_up, xhttp::mode::stream_up, xhttp::mode::stream_one}) {
    const xhttp::rules r{"/x/", m, 10, 50};
    const auto c = xhttp::classify(head.value.method, head.value.target, head.value.find("Referer"), r);
    if (c.invalid() && c.reason.empty()) __builtin_trap();
    if (!c.complete()) continue;
    if (c.value.padding < 10 || c.value.padding > 50) __builtin_trap();
    if (c.value.session.size() > xhttp::max_session_id) __builtin_trap();
    if ((c.value.kind == xhttp::request_kind::stream_one) != c.value.session.empty()) __builtin_trap();
  }
}

void check_chunked(std::string_view input) {
  xhttp::chunked_decoder whole;
  std::string a;
  const auto r = whole.feed(input, a, 1 << 16);
  if (r.consumed > input.size() || r.value != a.size()) __builtin_trap();
  // The same bytes split in two, with a small room: the same payload, as far as both went.
  xhttp::chunked_decoder split;
  std::string b;
  std::string_view rest = input;
  for (int rounds = 0; rounds < 4096 && !rest.empty(); ++rounds) {
    const std::size_t take = std::min<std::size_t>(rest.size(), 7);
    const auto s = split.feed(rest.substr(0, take), b, 13);
    if (s.consumed > take || s.value > 13) __builtin_trap();
    if (s.invalid() || s.complete()) break;
    rest.remove_prefix(s.consumed);
    if (s.consumed == 0) break;
  }
  if (!r.invalid() && b.size() <= a.size() && a.compare(0, b.size(), b) != 0) __builtin_trap();
}

void check_order(std::string_view input) {
  xhttp::uplink_order o(4, 64);
  for (std::size_t i = 0; i + 2 <= input.size(); i += 2) {
    const auto seq = static_cast<std::uint64_t>(static_cast<unsigned char>(input[i]) % 16);
    (void)o.accept(seq, std::string(static_cast<unsigned char>(input[i + 1]) % 40, 'x'));
    if (o.held() > 4 || o.held_bytes() > 64) __builtin_trap();
    (void)o.take();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  check_head(input);
  check_chunked(input);
  check_order(input);
  return 0;
}
