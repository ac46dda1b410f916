#pragma once
// The bytes of the two local proxy entries a client offers (HTTP CONNECT and SOCKS5 no-auth,
// RFC 1928), as pure functions so the tunnel code only moves bytes.
#include <cstdint>
#include <string>
#include <string_view>

#include "core/wire/parse_result.hpp"

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

// UDP ASSOCIATE (RFC 1928 §4, CMD 3) with DST 0.0.0.0:0: the client does not yet know which
// address it will send from, as most clients send it. The reply has CONNECT's form (parse it with
// parse_socks5_connect_reply); its BND.ADDR:BND.PORT is the relay.
std::string socks5_udp_associate_request();
struct socks5_bound {
  std::string host;  // IPv4/IPv6 literal as text, or a domain; "0.0.0.0"/"::" mean "the server's address"
  std::uint16_t port = 0;
};
// BND.ADDR and BND.PORT of a reply parse_socks5_connect_reply found complete.
socks5_bound socks5_reply_bound(std::string_view complete_reply);

}  // namespace vlessbench::runner
