// libFuzzer target for sing-mux's h2mux: the input as the HTTP/2 frames after the client preface of an
// h2mux session (SETTINGS, HEADERS, DATA, RST_STREAM, WINDOW_UPDATE, ... as the fuzzer makes them), through
// the sing-mux framing (server/sing_mux_framing.hpp) on the server's nghttp2 driver in its CONNECT mode
// (server/sing_mux_h2.hpp), fed in pieces of 13 bytes, with a stand-in engine answering every stream it opened
// and taking everything. Invariants: the framing's events are well formed; live streams stay within the
// limit; what it writes to the client is a chain of whole HTTP/2 frames (after the server's own SETTINGS).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "server/sing_mux_framing.hpp"
#include "server/sing_mux_h2.hpp"
#include "sub_engine_stand_in.hpp"

using namespace vlessbench;

namespace {
constexpr std::uint32_t max_streams = 3;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  sing_mux::framing b(max_streams, 1, [] { return std::make_unique<vless_server::sing_mux_h2>(max_streams); });
  fuzz::sub_engine_stand_in engine;
  sing_mux::sub_events events;
  std::string client;
  std::string in("\x00\x02PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 26);
  in.append(input);
  for (std::size_t at = 0; at < in.size(); at += 13) {
    if (!b.up(std::string_view(in).substr(at, 13), events, client).empty()) break;
    if (b.live() > max_streams) __builtin_trap();
    engine.take(b, events, client);
  }
  for (std::size_t at = 0; at < client.size();) {
    if (client.size() - at < 9) __builtin_trap();
    const auto byte = [&](std::size_t i) {
      return static_cast<std::size_t>(static_cast<unsigned char>(client[at + i]));
    };
    at += 9 + ((byte(0) << 16) | (byte(1) << 8) | byte(2));
    if (at > client.size()) __builtin_trap();
  }
  return 0;
}
