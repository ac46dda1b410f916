// libFuzzer target for what a REALITY listener reads before any TLS (core/wire/reality.hpp): the
// ClientHello record, then the facts it judges. Invariants: a complete record lies inside the
// input and holds one handshake message; a refusal says why; the facts' spans (random, session
// id, the X25519 value) lie inside the message, the X25519 value is 32 bytes or none; the group
// names' JSON is an array.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "core/wire/reality.hpp"

using namespace vlessbench;

namespace {
bool inside(std::span<const std::uint8_t> part, std::span<const std::uint8_t> whole) {
  return part.empty() || (part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size());
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> in(data, size);
  const auto record = reality::client_hello_record(in);
  if (record.invalid()) {
    if (record.reason.empty()) __builtin_trap();
    return 0;
  }
  if (record.need_more()) {
    if (size >= reality::max_record) __builtin_trap();  // never more than one record's worth
    return 0;
  }
  if (record.consumed > size || !inside(record.value, in) || record.value.size() + 5 != record.consumed)
    __builtin_trap();
  const auto facts = reality::read_hello_facts(record.value);
  if (facts.invalid()) {
    if (facts.reason.empty()) __builtin_trap();
    return 0;
  }
  if (!facts.complete()) __builtin_trap();
  const auto& f = facts.value;
  if (f.random.size() != 32 || !inside(f.random, f.message) || !inside(f.session_id, f.message)) __builtin_trap();
  if (f.session_id.size() > 32 || !inside(f.x25519, f.message)) __builtin_trap();
  if (!f.x25519.empty() && f.x25519.size() != 32) __builtin_trap();
  const std::string groups = reality::group_names_json(f.hello.supported_groups);
  if (groups.front() != '[' || groups.back() != ']') __builtin_trap();
  return 0;
}
