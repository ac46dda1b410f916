// libFuzzer target for the DNS response parser and the route TXT record
// (core/wire/dns_message.hpp), the runner's side of the [[dns]] responder.
// Invariants: never need_more; consumed never exceeds the input; an invalid
// verdict has a reason; addresses and their types pair up (A or AAAA);
// parse_route_txt never throws and a route it reads formats back to the same
// prefix and listener.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/wire/dns_message.hpp"

using namespace vlessbench;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto r = dns::parse_response(input);
  if (r.need_more()) __builtin_trap();
  if (r.consumed > size) __builtin_trap();
  if (r.invalid()) {
    if (r.reason.empty()) __builtin_trap();
  } else {
    if (r.value.addresses.size() != r.value.address_types.size()) __builtin_trap();
    for (auto t : r.value.address_types)
      if (t != dns::type_a && t != dns::type_aaaa) __builtin_trap();
    for (const auto& txt : r.value.additional_txt) {
      if (const auto route = dns::parse_route_txt(txt)) {
        if (route->listener.empty() || route->listener.find(' ') != std::string::npos) __builtin_trap();
        const std::string again = dns::format_route_txt(route->listener, route->route);
        if (again.substr(0, txt.size()) != txt.substr(0, again.size())) __builtin_trap();
      }
    }
  }
  // The TXT reader over the raw input too (any bytes can reach it).
  (void)dns::parse_route_txt(input);
  return 0;
}
