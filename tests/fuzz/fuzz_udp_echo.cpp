// libFuzzer target for the [[udp_target]] echo's answer (core/wire/route_header.hpp format_udp_echo /
// parse_udp_echo). Invariants: a refusal says why; a short answer names a size it needed; a complete
// one consumes all of it with a known route and a listener without a space. And the format side,
// the input taken as a datagram: a direct one's answer is never longer than the datagram (a relayed
// one too short for its trailer gets it appended), and a full or short answer reads back as what it is.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/wire/route_header.hpp"
#include "core/wire/session_info.hpp"

using namespace vlessbench;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto r = parse_udp_echo(input);
  if (r.invalid()) {
    if (r.reason.empty()) __builtin_trap();
  } else {
    if (!r.complete() || r.consumed != input.size()) __builtin_trap();
    if (r.value.route.kind == route_kind::unknown) __builtin_trap();
    if (r.value.listener.empty() || r.value.listener.find(' ') != std::string::npos) __builtin_trap();
    if (r.value.payload.size() >= input.size()) __builtin_trap();
  }
  route_info s;
  s.session_id = size;
  s.user = "fuzz";
  for (const route_info* route : {static_cast<const route_info*>(nullptr), static_cast<const route_info*>(&s)}) {
    const auto a = format_udp_echo(input, "udp", route);
    // Never longer than asked from a direct source; a relayed one may get its trailer appended.
    if (route == nullptr && a.bytes.size() > input.size()) __builtin_trap();
    const bool appended = route != nullptr && input.size() < udp_echo_trailer_size("udp", route);
    const auto back = parse_udp_echo(a.bytes);
    switch (a.form) {
      case udp_echo_form::full:
        if (a.bytes.size() != (appended ? input.size() + udp_echo_trailer_size("udp", route)
                                        : std::min(input.size(), max_udp_echo)) ||
            !back.complete() || back.value.listener != "udp" ||
            (back.value.route.kind == route_kind::vless) != (route != nullptr))
          __builtin_trap();
        break;
      case udp_echo_form::short_form:
        if (route != nullptr || a.bytes.size() != input.size() || !back.invalid() ||
            back.value.needed != udp_echo_trailer_size("udp", route))
          __builtin_trap();
        break;
      case udp_echo_form::none:
        if (route != nullptr || !a.bytes.empty() || input.size() >= udp_echo_trailer_size("udp", route))
          __builtin_trap();
        break;
    }
  }
  return 0;
}
