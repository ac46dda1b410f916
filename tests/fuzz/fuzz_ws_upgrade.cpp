// libFuzzer target for the upgrade head parser (both transports) and the client's response check.
// Invariants: consumed never exceeds the input; an invalid result has a reason with an HTTP
// status; a complete request's early data is within the cap and the 101 it gets parses as a 101
// for its own key; parsing the head alone gives the same result.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/wire/ws_upgrade.hpp"

using namespace vlessbench;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  for (auto kind : {ws::upgrade_kind::websocket, ws::upgrade_kind::httpupgrade}) {
    for (std::string_view header : {std::string_view{}, std::string_view("X-Ed")}) {
      const ws::upgrade_rules rules{kind, "/ws", "", 64, header};
      const auto r = ws::parse_upgrade_request(input, rules);
      if (r.consumed > size) __builtin_trap();
      if (r.invalid() && (r.reason.empty() || ws::reject_status(r.reason) < 400)) __builtin_trap();
      if (!r.complete()) continue;
      if (r.value.early_data.size() > rules.max_early_data) __builtin_trap();
      const auto again = ws::parse_upgrade_request(input.substr(0, r.consumed), rules);
      if (!again.complete() || again.consumed != r.consumed || again.value.early_data != r.value.early_data)
        __builtin_trap();
      const std::string resp = ws::format_upgrade_response(r.value, kind);
      const auto back = ws::parse_upgrade_response(resp, kind, r.value.key);
      if (!back.complete() || back.consumed != resp.size()) __builtin_trap();
    }
  }
  const auto resp = ws::parse_upgrade_response(input, ws::upgrade_kind::websocket, "dGhlIHNhbXBsZSBub25jZQ==");
  if (resp.consumed > size) __builtin_trap();
  const auto b = ws::base64_decode(input.substr(0, 256));
  if (b && ws::base64_decode(ws::base64_encode(*b, true)) != b) __builtin_trap();
  return 0;
}
