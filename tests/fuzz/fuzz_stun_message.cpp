// libFuzzer target for the STUN codec (core/wire/stun_message.hpp). Invariants: an invalid verdict has
// a reason; an accepted request consumes the whole datagram and has the magic cookie; its answer under
// the request's size as bound is never longer than the request, parses back as a success response with
// the transaction id and the mapped address, and is never itself accepted as a request; the response
// parser never reads past the input.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/wire/stun_message.hpp"

using namespace vlessbench;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto resp = stun::parse_response(input);
  if (resp.invalid() && resp.reason.empty()) __builtin_trap();
  const auto r = stun::parse_request(input);
  if (r.invalid()) {
    if (r.reason.empty()) __builtin_trap();
    return 0;
  }
  if (!r.complete() || r.consumed != size || size < stun::header_bytes || size > stun::max_request_bytes)
    __builtin_trap();
  stun::mapped_address m;
  m.v6 = (size & 1) != 0;
  m.port = static_cast<std::uint16_t>(size * 31);
  for (std::size_t i = 0; i < m.bytes.size(); ++i) m.bytes[i] = static_cast<std::uint8_t>(i * 7 + size);
  for (const std::size_t bound : {size, std::size_t{0}}) {
    const auto answer = stun::format_response(r.value, m, "udp vless session=1 user=fuzz", bound);
    if (bound != 0 && answer.size() > bound) __builtin_trap();
    if (answer.empty()) {
      if (bound == 0) __builtin_trap();
      continue;
    }
    const auto back = stun::parse_response(answer);
    if (!back.complete() || back.value.id != r.value.id || back.value.mapped.port != m.port ||
        back.value.mapped.v6 != m.v6 ||
        back.value.mapped.bytes != (m.v6 ? m.bytes : decltype(m.bytes){m.bytes[0], m.bytes[1], m.bytes[2], m.bytes[3]}))
      __builtin_trap();
    if (!stun::parse_request(answer).invalid()) __builtin_trap();
  }
  return 0;
}
