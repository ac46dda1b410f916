// libFuzzer target for the NTP codec (core/wire/ntp_message.hpp). Invariants: an invalid verdict has a
// reason; a request is accepted only as version 3 or 4, mode 3, 48 to 1024 bytes; its answer is 48
// bytes (never longer than the request), mode 4, and its origin is the request's transmit time.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/wire/ntp_message.hpp"

using namespace vlessbench;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto any = ntp::parse_packet(input);
  if (any.invalid() && any.reason.empty()) __builtin_trap();
  const auto r = ntp::parse_request(input);
  if (r.invalid()) {
    if (r.reason.empty()) __builtin_trap();
    return 0;
  }
  if (!r.complete() || r.consumed != size) __builtin_trap();
  if (size < ntp::header_bytes || size > ntp::max_request_bytes) __builtin_trap();
  if (r.value.mode != ntp::mode_client || r.value.version < 3 || r.value.version > 4) __builtin_trap();
  const auto answer = ntp::format_response(r.value, 1, 2);
  if (answer.size() != ntp::header_bytes || answer.size() > size) __builtin_trap();
  const auto back = ntp::parse_packet(answer);
  if (!back.complete() || back.value.mode != ntp::mode_server || back.value.origin != r.value.transmit)
    __builtin_trap();
  if (ntp::parse_request(answer).complete()) __builtin_trap();  // an answer is never answered
  return 0;
}
