#pragma once
// A VLESS user id: 16 bytes, written 8-4-4-4-12 in hex. The value the wire codecs, the share link
// and the config all use (the config holds users by it; the codecs compare it).
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace vlessbench {

using uuid_bytes = std::array<std::uint8_t, 16>;

}  // namespace vlessbench

namespace vlessbench::vless {

bool uuid_equal(const uuid_bytes& a, const uuid_bytes& b);
std::optional<uuid_bytes> parse_uuid(std::string_view text);  // 8-4-4-4-12 hex, any case
std::string format_uuid(const uuid_bytes& u);
uuid_bytes random_uuid();  // version 4

}  // namespace vlessbench::vless
