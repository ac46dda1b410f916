// libFuzzer target for the Mux.Cool frame parser. Invariants: consumed never exceeds the input;
// an invalid result has a reason; a complete frame re-encodes to exactly the bytes it was read
// from (the layout has one encoding); every proper prefix of a complete frame is need_more
// (a frame is never refused for being cut short); data lies inside the input. Then the input as
// a stream of frames drives a sub-connection table (server/mux_subs.hpp): never more live than its
// cap, numbers only grow, an opened id is live with its number, an ended or killed one is not.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/wire/mux_frame.hpp"
#include "server/mux_subs.hpp"

using namespace vlessbench;

namespace {

void drive_table(std::string_view input) {
  mux::sub_table table(3);
  std::uint32_t last = 0;
  while (!input.empty()) {
    const auto r = mux::parse_mux_frame(input);
    if (!r.complete()) return;
    input.remove_prefix(r.consumed);
    const auto d = table.on_frame(r.value);
    if (table.live() > 3) __builtin_trap();
    const auto* st = table.find(r.value.id);
    switch (d.act) {
      case mux::action::open:
        if (d.sub <= last || st == nullptr || st->sub != d.sub) __builtin_trap();
        last = d.sub;
        break;
      case mux::action::end:
      case mux::action::kill:
        if (st != nullptr || d.sub == 0 || d.reason.empty() != (d.act == mux::action::end)) __builtin_trap();
        break;
      case mux::action::deliver:
        if (st == nullptr || st->sub != d.sub) __builtin_trap();
        break;
      case mux::action::refuse:
      case mux::action::stray:
        if (d.reason.empty()) __builtin_trap();
        break;
      case mux::action::ignore: break;
    }
    if (d.act == mux::action::deliver && (r.value.id & 1) != 0) table.closed(r.value.id);  // the server ends some
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  drive_table(input);
  const auto r = mux::parse_mux_frame(input);
  if (r.consumed > size) __builtin_trap();
  if (r.invalid() && r.reason.empty()) __builtin_trap();
  if (!r.complete()) return 0;
  const auto& f = r.value;
  if (!f.data.empty() && (f.data.data() < input.data() || f.data.data() + f.data.size() > input.data() + size))
    __builtin_trap();
  std::string again;
  mux::encode_mux_frame(again, f);
  if (again != input.substr(0, r.consumed)) __builtin_trap();
  if (f.dest && mux::format_target(*f.dest).empty()) __builtin_trap();
  for (std::size_t n = r.consumed; n-- > 0;)
    if (!mux::parse_mux_frame(input.substr(0, n)).need_more()) __builtin_trap();
  return 0;
}
