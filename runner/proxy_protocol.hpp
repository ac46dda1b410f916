#pragma once
// The bytes of the two local proxy entries a client offers (HTTP CONNECT and SOCKS5 no-auth,
// RFC 1928), as pure functions so the tunnel code only moves bytes.
#include <cstdint>
#include <string>
#include <string_view>

#include "core/parse_result.hpp"

namespace vlessbench::runner {

// "CONNECT host:port HTTP/1.1" with the matching Host header.
std::string format_connect_request(std::string_view authority);

// Greeting offering only "no authentication required".
std::string socks5_greeting();
// Method selection reply: complete when the server picked no-auth; invalid otherwise.
parse_result<bool> parse_socks5_method_reply(std::string_view buffer);
// CONNECT request; IPv4 and IPv6 literals travel as addresses, anything else as a domain name
// (the proxy resolves it, as a client's mixed port does).
std::string socks5_connect_request(std::string_view host, std::uint16_t port);
// Reply to CONNECT: complete on "succeeded" with consumed = reply length; invalid with the
// RFC 1928 meaning of the REP field otherwise.
parse_result<bool> parse_socks5_connect_reply(std::string_view buffer);

}  // namespace vlessbench::runner
