// The one HOST:PORT parser (core/wire/net_address.hpp) that listeners, share links, the runner's paths
// and target URL, and the load generator share.
#include <catch2/catch.hpp>

#include <string>

#include "core/wire/net_address.hpp"

using namespace vlessbench;

namespace {

std::string refusal(std::string_view text, host_rule rule) {
  std::string reason;
  const auto hp = parse_host_port(text, rule, reason);
  INFO(std::string(text));
  REQUIRE_FALSE(hp);
  return reason;
}

}  // namespace

TEST_CASE("parse_host_port accepts names, IPv4 and bracketed IPv6, round-trips with format_host_port",
          "[net_address]") {
  std::string reason;
  for (const auto* text : {"localhost:8080", "example.com:1", "10.0.2.15:65535", "[::1]:8443", "[fe80::1]:443"}) {
    INFO(text);
    const auto hp = parse_host_port(text, host_rule::name_or_address, reason);
    REQUIRE(hp);
    CHECK(reason.empty());
    CHECK(format_host_port(hp->host, hp->port) == text);
  }
  const auto v6 = parse_host_port("[::1]:8443", host_rule::address_only, reason);
  REQUIRE(v6);
  CHECK(v6->host == "::1");
  CHECK(v6->port == 8443);
  const auto padded = parse_host_port("h:0000000000000008081", host_rule::name_or_address, reason);
  REQUIRE(padded);
  CHECK(padded->port == 8081);
}

TEST_CASE("parse_host_port refuses with a reason that names the problem", "[net_address]") {
  const auto names = host_rule::name_or_address;
  const auto ips = host_rule::address_only;
  CHECK(refusal("h", names) == "expected HOST:PORT");
  CHECK(refusal("1.2.3.4", ips) == "expected ADDRESS:PORT");
  CHECK(refusal(":80", names) == "empty host");
  CHECK(refusal("[]:80", names) == "empty host");
  CHECK(refusal(":80", ips) == "missing address (use 0.0.0.0 or [::] for every address)");
  CHECK(refusal("h:", names) == "missing port");
  CHECK(refusal("h:8x", names) == "port must be a number");
  CHECK(refusal("h:-1", names) == "port must be a number");
  CHECK(refusal("h:0", names) == "port out of range");
  CHECK(refusal("h:65536", names) == "port out of range");
  CHECK(refusal("h:99999999999999999999", names) == "port out of range");
  CHECK(refusal("::1:80", names) == "IPv6 addresses need brackets, e.g. [::1]:8443");
  CHECK(refusal("[::1:80", names) == "missing ']' after the IPv6 address");
  CHECK(refusal("[::1]80", names) == "expected [IPv6]:PORT");
  CHECK(refusal("[not-ip]:80", names) == "not a valid IPv6 address");
  CHECK(refusal("a b:80", names) == "bad character in host");
  CHECK(refusal("localhost:80", ips) == "hostnames are not accepted, use an IP address (e.g. 127.0.0.1 or [::1])");
  CHECK(refusal("300.1.1.1:80", ips) == "not a valid IPv4 address");
}

TEST_CASE("parse_endpoint takes address literals only", "[net_address]") {
  std::string reason;
  asio::ip::tcp::endpoint ep;
  REQUIRE(parse_endpoint("[::1]:8443", ep, reason));
  CHECK(ep.address().is_v6());
  CHECK(format_endpoint(ep) == "[::1]:8443");
  CHECK_FALSE(parse_endpoint("localhost:8443", ep, reason));
  CHECK_THAT(reason, Catch::Contains("hostnames are not accepted"));
}

TEST_CASE("parse_host_header: host [port], IPv6 in brackets, normal form", "[net_address]") {
  std::string why;
  auto h = parse_host_header("LocalHost.:9090", why);
  REQUIRE(h);
  CHECK(h->host == "localhost");
  CHECK_FALSE(h->address);
  h = parse_host_header("[::ffff:10.0.0.1]:80", why);
  REQUIRE(h);
  CHECK(h->host == "10.0.0.1");
  REQUIRE(h->address);
  CHECK(h->address->is_v4());
  h = parse_host_header("[::1]", why);
  REQUIRE(h);
  CHECK(h->host == "::1");
  CHECK(parse_host_header("127.0.0.1", why)->address);
  CHECK_FALSE(parse_host_header("::1", why));
  CHECK(why == "IPv6 addresses need brackets");
  CHECK_FALSE(parse_host_header("a.example:0", why));
  CHECK_FALSE(parse_host_header("a.example:65536", why));
  CHECK_FALSE(parse_host_header("a.example:", why));
  CHECK_FALSE(parse_host_header("", why));
  CHECK_FALSE(parse_host_header("[::1", why));
  CHECK_FALSE(parse_host_header("[::1]x", why));
  CHECK_FALSE(parse_host_header("a..example", why));
  // Two trailing dots: one is the root's, the other an empty label (fuzz_host_header found it
  // accepted as "a.", which no longer normalises to itself).
  CHECK_FALSE(parse_host_header("rebind.example..:8", why));
  CHECK(why == "empty label in host name");
  CHECK_FALSE(parse_host_header("evil.example/x", why));
  CHECK_FALSE(parse_host_header(std::string(64, 'a') + ".example", why));
}
