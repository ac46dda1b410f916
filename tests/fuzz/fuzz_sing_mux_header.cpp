// libFuzzer target for sing-mux's own parsers (core/wire/sing_mux.hpp): the session request, the stream
// request, UDP packets both ways, and the padding remover. Invariants: consumed never exceeds the input; an
// invalid result has a reason; a complete stream request and UDP packet re-encode to the bytes they were read
// from; every proper prefix of a complete one is need_more; the unpadder never yields more than it was fed.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/wire/sing_mux.hpp"

using namespace vlessbench;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto req = sing_mux::parse_request(input);
  if (req.consumed > size || (req.invalid() && req.reason.empty())) __builtin_trap();
  const auto sr = sing_mux::parse_stream_request(input);
  if (sr.consumed > size || (sr.invalid() && sr.reason.empty())) __builtin_trap();
  if (sr.complete()) {
    if (sing_mux::encode_stream_request(sr.value) != input.substr(0, sr.consumed)) __builtin_trap();
    for (std::size_t n = sr.consumed; n-- > 0;)
      if (!sing_mux::parse_stream_request(input.substr(0, n)).need_more()) __builtin_trap();
  }
  for (const bool addressed : {false, true}) {
    const auto p = sing_mux::parse_udp_packet(input, addressed);
    if (p.consumed > size || (p.invalid() && p.reason.empty())) __builtin_trap();
    if (!p.complete()) continue;
    if (p.value.dest.has_value() != addressed) __builtin_trap();
    std::string again;
    sing_mux::encode_udp_packet(again, p.value.dest ? &*p.value.dest : nullptr, p.value.data);
    if (again != input.substr(0, p.consumed)) __builtin_trap();
  }
  sing_mux::unpadder u;
  std::string out;
  u.feed(input.substr(0, size / 2), out);
  u.feed(input.substr(size / 2), out);
  if (out.size() > size) __builtin_trap();
  return 0;
}
