// libFuzzer target for the config parser: any bytes must end in a config or a config_error.
// Anything else escaping (toml++ internals, std::out_of_range, ...) is a bug and is left to
// reach libFuzzer, which reports it as a crash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/config/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    vlessbench::config c = vlessbench::parse_config(text, "fuzz.toml");
    // A config that passed validation must satisfy what validation promises: at least one
    // listener of any kind (a [[dns]] or [[udp_target]] alone is a config, tests/unit/core/config/test_config.cpp).
    if (c.vless.empty() && c.target.empty() && c.udp_target.empty() && c.dns.empty()) __builtin_trap();
    if (c.users.empty()) __builtin_trap();
    for (const auto& u : c.users)
      if (u.uuid_text.size() != 36 || u.name.empty()) __builtin_trap();
  } catch (const vlessbench::config_error& e) {
    // Every message is "FILE:LINE: ..." on its own line.
    for (const auto& line : e.errors())
      if (line.rfind("fuzz.toml:", 0) != 0 || line.find('\n') != std::string::npos) __builtin_trap();
  }
  return 0;
}
