// libFuzzer target for the DNS query parser and response builder
// (core/wire/dns_message.hpp). Invariants: consumed never exceeds the input; an
// invalid verdict has a reason; a parsed name is at most 253 characters of
// lower case with no empty label; the response to a parsed question parses back
// (as a query) to the same question; answering never throws.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "core/wire/dns_message.hpp"

using namespace vlessbench;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto r = dns::parse_query(input);
  if (r.consumed > size) __builtin_trap();
  if (r.invalid()) {
    if (r.reason.empty()) __builtin_trap();
    const auto id = dns::message_id(input);
    const std::string formerr = dns::build_response(id.value_or(0), false, nullptr, dns::rcode::formerr);
    if (formerr.size() != dns::header_bytes) __builtin_trap();
    return 0;
  }
  if (!r.complete()) __builtin_trap();  // a message is whole: never need_more
  const dns::question& q = r.value.q;
  if (q.name.size() > 253) __builtin_trap();
  for (char c : q.name)
    if (std::isupper(static_cast<unsigned char>(c))) __builtin_trap();
  // A label with a dot byte is refused (bad_label): every name read back is
  // whole labels, so its answer can always be written.
  const dns::zone_rules zone;
  const auto a = dns::answer_in_zone(zone, q);
  if (a.delay_ms > dns::max_delay_ms) __builtin_trap();
  std::string m = dns::build_response(r.value.id, r.value.recursion_desired, &q, a.rc, a.answers);
  m[2] = static_cast<char>(m[2] & 0x01);  // clear QR, opcode and AA: read it back as a query
  const auto back = dns::parse_query(m);
  if (!back.complete() || back.value.q.name != q.name || back.value.q.qtype != q.qtype) __builtin_trap();
  return 0;
}
