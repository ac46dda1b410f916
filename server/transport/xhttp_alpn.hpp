#pragma once
// What an XHTTP listener over TLS serves, by ALPN protocol, the preferred first: the listener's
// links ask for the first (Xray's XHTTP client offers h2 alone unless its entry names one), so
// they change with what the transport serves. HTTP/2 goes first once the listener serves it.
#include <array>
#include <string_view>

namespace vlessbench::xhttp {

inline constexpr std::array<std::string_view, 1> served_alpn{"http/1.1"};

}  // namespace vlessbench::xhttp
