// Who may open a VLESS session (server/admission.hpp): the verdict for each kind of header, the
// user named even when a later check refuses, and the DNS-name rule a resolver relies on.
#include <catch2/catch.hpp>

#include "core/client/vless_client.hpp"
#include "server/admission.hpp"

using namespace vlessbench;

namespace {

config two_users() {
  return parse_config(R"(
[[users]]
name = "alice"
uuid = "11111111-1111-4111-8111-111111111111"
[[users]]
name = "bob"
uuid = "22222222-2222-4222-8222-222222222222"
[[target]]
name = "t"
listen = "127.0.0.1:8080"
)",
                      "x.toml");
}

vless::request_header request(const char* uuid, std::string_view host = "127.0.0.1", std::uint16_t port = 8080) {
  return vless::tcp_request(*vless::parse_uuid(uuid), host, port);
}

// The refusal's reason, or "admitted".
std::string_view reason_of(const admission_verdict& v) { return v.refused ? v.refused->reason : "admitted"; }
std::string detail_of(const admission_verdict& v) { return v.refused ? v.refused->detail : "admitted"; }

}  // namespace

TEST_CASE("admission: a known user's TCP request is admitted, naming the user", "[admission]") {
  const auto cfg = two_users();
  const auto v = admit_request(cfg, request("22222222-2222-4222-8222-222222222222"));
  CHECK(v.admitted());
  CHECK_FALSE(v.refused);
  REQUIRE(v.user != nullptr);
  CHECK(v.user->name == "bob");
  CHECK(admit_request(cfg, request("22222222-2222-4222-8222-222222222222", "vlessbench.test")).admitted());
  CHECK(admit_request(cfg, request("11111111-1111-4111-8111-111111111111", "::1")).user->name == "alice");
}

TEST_CASE("admission: each refusal has its reason, the user known where it is", "[admission]") {
  const auto cfg = two_users();
  const char* alice = "11111111-1111-4111-8111-111111111111";

  auto unknown = admit_request(cfg, request("33333333-3333-4333-8333-333333333333"));
  CHECK(reason_of(unknown) == "unknown_user");
  CHECK(unknown.user == nullptr);

  auto flow = request(alice);
  flow.flow = "xtls-rprx-direct";  // XTLS's old flows: not served
  const auto v_flow = admit_request(cfg, flow);
  CHECK(reason_of(v_flow) == "flow_unsupported");
  CHECK(detail_of(v_flow) == "xtls-rprx-direct");
  REQUIRE(v_flow.user != nullptr);
  CHECK(v_flow.user->name == "alice");
  flow.flow = "xtls-rprx-vision";  // Vision is (the session refuses it off raw TLS)
  CHECK(admit_request(cfg, flow).admitted());

  auto cmd = request(alice);
  cmd.command = 2;  // UDP: admitted; its destination is checked like a TCP one
  CHECK(admit_request(cfg, cmd).admitted());
  cmd.command = 3;  // Mux.Cool: admitted; the header has no destination (port 0), each New names one
  cmd.dest = destination_for_host("v1.mux.cool", 0);
  CHECK(admit_request(cfg, cmd).admitted());
  cmd.command = 9;
  const auto v_cmd = admit_request(cfg, cmd);
  CHECK(reason_of(v_cmd) == "bad_command");
  CHECK(detail_of(v_cmd) == "9");

  CHECK(reason_of(admit_request(cfg, request(alice, "127.0.0.1", 0))) == "bad_port");
  const auto v_dom = admit_request(cfg, request(alice, std::string(64, 'a') + ".test"));
  CHECK(reason_of(v_dom) == "bad_domain");
  REQUIRE(v_dom.refused);
  CHECK(!v_dom.refused->detail.empty());
}

TEST_CASE("admission: a DNS name has labels of 1..63 and at most 253 bytes", "[admission]") {
  CHECK(valid_dns_name("vlessbench.test"));
  CHECK(valid_dns_name("vlessbench.test."));
  CHECK(valid_dns_name(std::string(63, 'a') + ".b"));
  CHECK_FALSE(valid_dns_name(std::string(64, 'a') + ".b"));
  CHECK_FALSE(valid_dns_name(""));
  CHECK_FALSE(valid_dns_name("."));
  CHECK_FALSE(valid_dns_name("a..b"));
  CHECK_FALSE(valid_dns_name(".a"));
  std::string long_name;
  while (long_name.size() < 250) long_name += "abcdefghi.";
  long_name += "abcd";  // 254 bytes
  CHECK_FALSE(valid_dns_name(long_name));
  long_name.pop_back();  // 253
  CHECK(valid_dns_name(long_name));
}

TEST_CASE("admission: sing-mux's destination is admitted over TCP and refused by name over UDP", "[admission]") {
  const auto cfg = two_users();
  auto req = request("11111111-1111-4111-8111-111111111111", "sp.mux.sing-box.arpa", 444);
  CHECK(is_sing_mux_request(req));
  CHECK(admit_request(cfg, req).admitted());  // each stream names its own destination (server/sing_mux_session.hpp)
  req.command = static_cast<std::uint8_t>(vless::command::udp);
  CHECK_FALSE(is_sing_mux_request(req));
  const auto v = admit_request(cfg, req);
  CHECK(reason_of(v) == "sing_mux_not_tcp");
  REQUIRE(v.user != nullptr);
  CHECK(v.user->name == "alice");
  CHECK(admit_request(cfg, request("11111111-1111-4111-8111-111111111111", "mux.sing-box.arpa", 444)).admitted());
}
