// libFuzzer target for the mux client's frame intake (core/client/mux_client.hpp, sub_table::feed):
// the server's bytes filed under sub-connections. Invariants: the same bytes fed whole or cut at
// any point give the same verdict and leave every sub the same bytes, datagrams, End state and
// counters (a frame cut by a read is never refused or lost); nothing filed or dropped exceeds the
// input; a table that accepted everything still writes valid frames.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/client/mux_client.hpp"

using namespace vlessbench;

namespace {

struct run {
  mux::sub_table table{8, 1u << 20};
  std::uint16_t tcp_a = 0, tcp_b = 0, udp = 0;
  std::string verdict;
  run() {
    std::string out;
    const auto t = *mux::make_target(mux::network::tcp, "127.0.0.1", 80);
    const auto u = *mux::make_target(mux::network::udp, "127.0.0.1", 53);
    tcp_a = *table.open(out, t);
    tcp_b = *table.open(out, t, "x");
    udp = *table.open(out, u, "q", true);
  }
  std::string drain(std::uint16_t id) {
    std::string s;
    char buf[4096];
    while (const auto n = table.take(id, buf, sizeof buf)) s.append(buf, n);
    return s;
  }
  std::string packets() {
    std::string s;
    while (auto p = table.take_packet(udp)) s += std::to_string(p->data.size()) + ":" + p->data + (p->from ? "@" : ";");
    return s;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t cut = size == 0 ? 0 : data[0] % (size + 1);
  run whole;
  run split;
  whole.verdict = whole.table.feed(input);
  split.verdict = split.table.feed(input.substr(0, cut));
  if (split.verdict.empty()) split.verdict = split.table.feed(input.substr(cut));
  if (whole.verdict != split.verdict) __builtin_trap();
  if (!whole.verdict.empty()) return 0;
  if (whole.table.dropped_bytes() != split.table.dropped_bytes()) __builtin_trap();
  if (whole.table.keep_alives() != split.table.keep_alives()) __builtin_trap();
  for (const auto id : {whole.tcp_a, whole.tcp_b, whole.udp})
    if (whole.table.remote_ended(id) != split.table.remote_ended(id) ||
        whole.table.remote_error(id) != split.table.remote_error(id))
      __builtin_trap();
  const std::string a = whole.drain(whole.tcp_a), b = whole.drain(whole.tcp_b), p = whole.packets();
  if (a != split.drain(split.tcp_a) || b != split.drain(split.tcp_b) || p != split.packets()) __builtin_trap();
  if (a.size() + b.size() + whole.table.dropped_bytes() > size) __builtin_trap();
  std::string out;
  if (!whole.table.write(out, whole.tcp_a, a) || !whole.table.end(out, whole.tcp_b)) __builtin_trap();
  for (std::string_view rest = out; !rest.empty();) {
    const auto r = mux::parse_mux_frame(rest);
    if (!r.complete()) __builtin_trap();
    rest.remove_prefix(r.consumed);
  }
  return 0;
}
