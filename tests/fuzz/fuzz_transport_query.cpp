// libFuzzer target for a share link's transport parameters (core/wire/transport_spec.hpp:
// parse_query then parse_transport_query). Invariants checked: a refusal always says why; an
// accepted query formats (transport_query) to one that parses back to the same spec, and
// formatting that again gives the same parameters.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/wire/percent.hpp"
#include "core/wire/transport_spec.hpp"

using namespace vlessbench;

namespace {

std::string query_text(const transport_spec& t) {
  std::string out;
  for (const auto& [key, value] : transport_query(t)) {
    if (!out.empty()) out += '&';
    out += std::string(key) + "=" + percent_encode(value);
  }
  return out;
}

std::optional<transport_spec> parse(std::string_view text, std::string& reason) {
  query_params params;
  if (!parse_query(text, params, reason)) return std::nullopt;
  return parse_transport_query(params, reason);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::string reason;
  const auto spec = parse(input, reason);
  if (!spec) {
    if (reason.empty()) __builtin_trap();
    return 0;
  }
  if (!reason.empty()) __builtin_trap();
  if (!spec->early_data_header.empty()) __builtin_trap();  // never a link's
  const std::string text = query_text(*spec);
  std::string reason2;
  const auto back = parse(text, reason2);
  if (!back || !(*back == *spec)) __builtin_trap();
  if (query_text(*back) != text) __builtin_trap();
  return 0;
}
