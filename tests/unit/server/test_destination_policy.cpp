#include <catch2/catch.hpp>

#include <string>

#include "core/config/config.hpp"
#include "server/destination_policy.hpp"

using namespace vlessbench;

namespace {

asio::ip::tcp::endpoint ep(const char* addr, unsigned short port) { return {asio::ip::make_address(addr), port}; }

}  // namespace

TEST_CASE("the daemon's own VLESS listeners are never a destination", "[config][destinations]") {
  const char* listeners = R"([[users]]
name = "a"
uuid = "11111111-2222-4333-8444-555555555555"
[[vless]]
name = "lo"
listen = "127.0.0.1:8443"
[[vless]]
name = "lan"
listen = "192.0.2.10:8444"
[[vless]]
name = "any6"
listen = "[::]:8445"
[[target]]
name = "http"
listen = "127.0.0.1:8080"
)";
  const config c = parse_config(listeners, "x.toml");
  int machine_calls = 0;
  auto machine = [&] {
    ++machine_calls;
    return address_list{asio::ip::make_address("192.0.2.10"), asio::ip::make_address("2001:db8::4")};
  };
  auto verdict = [&](const config& cfg, const char* addr, unsigned short port) {
    return check_destination(cfg, ep(addr, port), machine);
  };
  constexpr auto own = destination_verdict::vless_listener;

  SECTION("on any local address, whatever the listener is bound to") {
    CHECK(verdict(c, "127.0.0.1", 8443) == own);
    CHECK(verdict(c, "127.0.0.2", 8443) == own);  // another loopback address, same port
    CHECK(verdict(c, "::1", 8443) == own);
    CHECK(verdict(c, "::ffff:127.0.0.1", 8443) == own);  // v4-mapped
    CHECK(verdict(c, "0.0.0.0", 8443) == own);           // connect() to 0.0.0.0 is the local host
    CHECK(verdict(c, "::", 8445) == own);
    CHECK(verdict(c, "192.0.2.10", 8444) == own);  // the listener's own address
    CHECK(verdict(c, "::ffff:192.0.2.10", 8444) == own);
    CHECK(verdict(c, "127.0.0.1", 8444) == own);   // loopback, though it listens on the LAN
    CHECK(verdict(c, "192.0.2.10", 8443) == own);  // a machine address, though it listens on loopback
    CHECK(verdict(c, "2001:db8::4", 8445) == own);
  }
  SECTION("the reason the log gives") {
    CHECK(reject_reason(own) == "dest_is_vless_listener");
    CHECK(reject_reason(destination_verdict::not_allowed) == "dest_not_allowed");
    CHECK_FALSE(destination_allowed(c, ep("127.0.0.1", 8443), machine));
  }
  SECTION("even when [destinations] allows everything") {
    const config any =
        parse_config(std::string(listeners) + "[destinations]\nallow = [\"0.0.0.0/0\", \"::/0\"]\n", "x.toml");
    CHECK(verdict(any, "127.0.0.1", 8443) == own);
    CHECK(verdict(any, "192.0.2.10", 8443) == own);
    CHECK(verdict(any, "0.0.0.0", 8444) == own);
    CHECK(verdict(any, "198.51.100.7", 8443) == destination_verdict::allowed);  // another host's 8443
  }
  SECTION("other ports keep the ordinary policy, without asking the machine") {
    CHECK(verdict(c, "127.0.0.1", 8080) == destination_verdict::allowed);
    CHECK(verdict(c, "127.0.0.1", 9) == destination_verdict::allowed);
    CHECK(verdict(c, "203.0.113.9", 8443) == destination_verdict::not_allowed);
    CHECK(verdict(c, "203.0.113.9", 80) == destination_verdict::not_allowed);
    machine_calls = 0;
    CHECK(verdict(c, "127.0.0.1", 8446) == destination_verdict::allowed);
    CHECK(machine_calls == 0);
  }
  SECTION("the embedded default: 8443 and 8444 refused, the target on 8080 reached") {
    const config d = default_config();
    CHECK(check_destination(d, ep("127.0.0.1", 8443)) == own);
    CHECK(check_destination(d, ep("127.0.0.1", 8444)) == own);
    CHECK(check_destination(d, ep("127.0.0.1", 8080)) == destination_verdict::allowed);
  }
}

TEST_CASE("UDP sessions reach the daemon's own UDP targets and [[dns]] on a wildcard, by protocol",
          "[config][destinations]") {
  const config c = parse_config(R"([[users]]
name = "a"
uuid = "11111111-2222-4333-8444-555555555555"
[[vless]]
name = "lan"
listen = "192.0.2.10:8443"
[[target]]
name = "http"
listen = "0.0.0.0:8080"
[[udp_target]]
name = "udp"
listen = "0.0.0.0:8083"
[[dns]]
name = "dns"
listen = "0.0.0.0:8053"
)",
                                "x.toml");
  auto machine = [] { return address_list{asio::ip::make_address("192.0.2.10")}; };
  auto verdict = [&](const char* addr, unsigned short port, ip_protocol proto) {
    return check_destination(c, ep(addr, port), machine, proto);
  };
  constexpr auto ok = destination_verdict::allowed;
  constexpr auto no = destination_verdict::not_allowed;
  // The VM's own address: each target on the protocol it listens on, and only that one.
  CHECK(verdict("192.0.2.10", 8083, ip_protocol::udp) == ok);
  CHECK(verdict("192.0.2.10", 8083, ip_protocol::tcp) == no);  // nothing listens on TCP 8083
  CHECK(verdict("192.0.2.10", 8080, ip_protocol::tcp) == ok);
  CHECK(verdict("192.0.2.10", 8080, ip_protocol::udp) == no);
  CHECK(verdict("192.0.2.10", 8053, ip_protocol::udp) == ok);  // [[dns]]: both
  CHECK(verdict("192.0.2.10", 8053, ip_protocol::tcp) == ok);
  // Not one of the machine's addresses.
  CHECK(verdict("192.0.2.11", 8083, ip_protocol::udp) == no);
  // A datagram to a VLESS listener's port nests no session: the ordinary policy decides.
  CHECK(verdict("127.0.0.1", 8443, ip_protocol::udp) == ok);
  CHECK(verdict("192.0.2.10", 8443, ip_protocol::udp) == no);
  CHECK(verdict("192.0.2.10", 8443, ip_protocol::tcp) == destination_verdict::vless_listener);
}
