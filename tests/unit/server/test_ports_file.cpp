// server/ports_file: what `vlessbenchd --ports-file` writes and `links --ports-file` and the
// integration harness read, as a format + parse pair; resolve_ports fills a config's port-0
// endpoints from it.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/config/config.hpp"
#include "server/ports_file.hpp"

using namespace vlessbench;

namespace {

asio::ip::tcp::endpoint ep(const char* addr, unsigned short port) { return {asio::ip::make_address(addr), port}; }

const char* const zero_config = R"(
[[vless]]
name = "v"
listen = "127.0.0.1:0"

[[vless]]
name = "fixed"
listen = "127.0.0.1:8443"

[[banner]]
name = "b"
listen = "[::1]:0"

[[udp_target]]
name = "u"
listen = "127.0.0.1:0"

[[dns]]
name = "d"
listen = "127.0.0.1:0"

[admin]
listen = "127.0.0.1:0"
)";

}  // namespace

TEST_CASE("resolve_ports fills each port 0 from what was bound under the listener's name", "[ports_file]") {
  config c = parse_config(zero_config, "z.toml");
  const bound_ports bound{{{"v", ep("127.0.0.1", 40001)},
                           {"fixed", ep("127.0.0.1", 8443)},
                           {"b", ep("::1", 40002)},
                           {"u", ep("127.0.0.1", 40003)},
                           {"d", ep("127.0.0.1", 40004)}},
                          ep("127.0.0.1", 40005)};
  CHECK(resolve_ports(c, bound).empty());
  CHECK(c.vless[0].listen == ep("127.0.0.1", 40001));
  CHECK(c.vless[1].listen == ep("127.0.0.1", 8443));
  CHECK(c.target[0].listen == ep("::1", 40002));
  CHECK(c.udp_target[0].listen == asio::ip::udp::endpoint(asio::ip::make_address("127.0.0.1"), 40003));
  CHECK(c.dns[0].listen == ep("127.0.0.1", 40004));
  CHECK(*c.admin.listen == ep("127.0.0.1", 40005));

  // A fixed port is never replaced; a missing entry is named and stays 0.
  config partial = parse_config(zero_config, "z.toml");
  const bound_ports some{{{"fixed", ep("127.0.0.1", 9999)}, {"u", ep("127.0.0.1", 40003)}}, std::nullopt};
  CHECK(resolve_ports(partial, some) == std::vector<std::string>{"v", "b", "d", "admin"});
  CHECK(partial.vless[1].listen.port() == 8443);
  CHECK(partial.vless[0].listen.port() == 0);
}

TEST_CASE("the ports file round-trips, and a file that is not one is refused with a reason", "[ports_file]") {
  config c = parse_config(zero_config, "z.toml");
  const bound_ports bound{{{"v", ep("127.0.0.1", 40001)},
                           {"fixed", ep("127.0.0.1", 8443)},
                           {"b", ep("::1", 40002)},
                           {"u", ep("127.0.0.1", 40003)},
                           {"d", ep("127.0.0.1", 40004)}},
                          ep("127.0.0.1", 40005)};
  REQUIRE(resolve_ports(c, bound).empty());
  const std::string text = format_ports_file(c, 3);
  CHECK(text == R"({"admin":"127.0.0.1:40005","generation":3,"listeners":[)"
                R"({"kind":"vless","listen":"127.0.0.1:40001","name":"v","protocols":"tcp"},)"
                R"({"kind":"vless","listen":"127.0.0.1:8443","name":"fixed","protocols":"tcp"},)"
                R"({"kind":"banner","listen":"[::1]:40002","name":"b","protocols":"tcp"},)"
                R"({"kind":"udp_target","listen":"127.0.0.1:40003","name":"u","protocols":"udp"},)"
                R"({"kind":"dns","listen":"127.0.0.1:40004","name":"d","protocols":"tcp+udp"}]})"
                "\n");
  std::string reason;
  const auto back = parse_ports_file(text, reason);
  REQUIRE(back);
  CHECK(*back == bound);

  c.admin.listen.reset();
  const auto no_admin = parse_ports_file(format_ports_file(c, 1), reason);
  REQUIRE(no_admin);
  CHECK_FALSE(no_admin->admin);

  CHECK_FALSE(parse_ports_file("", reason));
  CHECK(reason == "not a JSON object");
  CHECK_FALSE(parse_ports_file("[]", reason));
  CHECK(reason == "not a JSON object");
  CHECK_FALSE(parse_ports_file(R"({"admin":null})", reason));
  CHECK(reason == "no \"listeners\" array");
  CHECK_FALSE(parse_ports_file(R"({"listeners":[{"name":"v"}]})", reason));
  CHECK(reason == "a listener without \"name\" and \"listen\"");
  CHECK_FALSE(parse_ports_file(R"({"listeners":[{"name":"v","listen":"127.0.0.1:0"}]})", reason));
  CHECK(reason == "listener \"v\": not an ADDRESS:PORT (port out of range)");
  CHECK_FALSE(parse_ports_file(R"({"listeners":[],"admin":"localhost:1"})", reason));
  CHECK(reason.find("admin: not an ADDRESS:PORT") == 0);
}
