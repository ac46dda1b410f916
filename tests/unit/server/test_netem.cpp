#include <catch2/catch.hpp>

#include "core/config/config.hpp"
#include "server/netem.hpp"
#include "server/reload_plan.hpp"

#include <netlink/errno.h>

using namespace vlessbench;

namespace {

asio::ip::tcp::endpoint ep(const char* addr, unsigned short port) { return {asio::ip::make_address(addr), port}; }

const char* const loopback_target = "[[target]]\nname = \"http\"\nlisten = \"127.0.0.1:8080\"\n";

std::string error_of(std::string_view text) {
  try {
    parse_config(text, "x.toml");
  } catch (const config_error& e) {
    return e.what();
  }
  return "<accepted>";
}

}  // namespace

TEST_CASE("emulate = { delay_ms, jitter_ms, loss_pct } on [[vless]] and the targets", "[config][netem]") {
  const auto c = parse_config(std::string("[[vless]]\nname = \"far\"\nlisten = \"127.0.0.1:9443\"\n"
                                          "emulate = { delay_ms = 40, jitter_ms = 2, loss_pct = 1 }\n"
                                          "[[vless]]\nname = \"near\"\nlisten = \"127.0.0.1:9444\"\n"
                                          "[[target]]\nname = \"slow\"\nlisten = \"127.0.0.1:8080\"\n"
                                          "emulate = { loss_pct = 0.5 }\n"
                                          "[[banner]]\nname = \"b\"\nlisten = \"127.0.0.1:8082\"\n"
                                          "emulate = { delay_ms = 5 }\n"),
                              "e.toml");
  REQUIRE(c.vless.size() == 2);
  CHECK(c.vless[0].emulate == path_emulation{40, 2, 1.0});
  CHECK(c.vless[0].emulate.active());
  CHECK_FALSE(c.vless[1].emulate.active());
  CHECK(c.target[0].emulate.loss_pct == Approx(0.5));
  CHECK(c.target[1].emulate.delay_ms == 5);
  CHECK(describe(c.vless[0].emulate) == "delay 40 ms jitter 2 ms loss 1%");
  CHECK(describe(c.vless[1].emulate) == "off");
  // The reload plan carries it, and a change of it is a change of the listener.
  const auto planned = listeners_of(c);
  CHECK(planned[0].emulate.delay_ms == 40);
  CHECK(planned[2].emulate.loss_pct == Approx(0.5));

  const std::string head = "[[vless]]\nname = \"v\"\nlisten = \"127.0.0.1:9443\"\n";
  CHECK_THAT(error_of(head + "emulate = { delay_ms = -1 }\n"),
             Catch::Contains("vless[0].emulate.delay_ms") && Catch::Contains("0 to 10000"));
  CHECK_THAT(error_of(head + "emulate = { delay_ms = 10001 }\n"), Catch::Contains("0 to 10000"));
  CHECK_THAT(error_of(head + "emulate = { loss_pct = 101 }\n"),
             Catch::Contains("emulate.loss_pct") && Catch::Contains("0 to 100"));
  CHECK_THAT(error_of(head + "emulate = { loss_pct = \"1%\" }\n"), Catch::Contains("expected a number"));
  CHECK_THAT(error_of(head + "emulate = { delay_ms = 10, jitter_ms = 20 }\n"),
             Catch::Contains("jitter_ms") && Catch::Contains("more than delay_ms"));
  CHECK_THAT(error_of(head + "emulate = { delay = 10 }\n"), Catch::Contains("emulate.delay"));
  CHECK_THAT(error_of(head + "emulate = 40\n"), Catch::Contains("emulate"));
}

TEST_CASE("reload plan: an emulate change is a listener change", "[config][netem]") {
  const auto a = parse_config(std::string("[[vless]]\nname = \"v\"\nlisten = \"127.0.0.1:9443\"\n"
                                          "emulate = { delay_ms = 40 }\n") +
                                  loopback_target,
                              "a.toml");
  const auto b = parse_config(std::string("[[vless]]\nname = \"v\"\nlisten = \"127.0.0.1:9443\"\n"
                                          "emulate = { delay_ms = 0 }\n") +
                                  loopback_target,
                              "b.toml");
  const auto plan = plan_reload(a, b);
  REQUIRE(plan.keep.size() == 2);
  CHECK(plan.keep[0].to.emulate.delay_ms == 0);
  REQUIRE(plan.changes.size() == 1);
  CHECK_THAT(plan.changes[0], Catch::Contains("emulate delay 40 ms -> off"));
}

TEST_CASE("netem plan: which interfaces get which bands", "[netem]") {
  const std::vector<netem::interface_info> itfs{
      {"lo", 1, true, true}, {"eth0", 2, true, false}, {"eth1", 3, false, false}};
  const std::vector<netem::emulated_port> ports{
      {"far", ep("0.0.0.0", 9443), {40, 0, 0}},
      {"near", ep("0.0.0.0", 9444), {}},  // no emulation: no band
      {"local", ep("127.0.0.1", 9445), {10, 0, 1}},
  };
  const auto plans = netem::plan(ports, itfs);
  REQUIRE(plans.size() == 2);  // eth1 is down
  CHECK(plans[0].interface.name == "lo");
  REQUIRE(plans[0].bands.size() == 2);
  CHECK(plans[0].bands[0].port == 9443);
  CHECK(plans[0].bands[0].classid == 0x76620004);  // after prio's three own bands
  CHECK(plans[0].bands[0].netem_handle == 0x76630000);
  CHECK(plans[0].bands[1].port == 9445);
  CHECK(plans[0].bands[1].classid == 0x76620005);
  CHECK(plans[0].bands[1].netem_handle == 0x76640000);
  CHECK(plans[1].interface.name == "eth0");
  REQUIRE(plans[1].bands.size() == 1);  // a loopback listener's traffic never leaves by eth0
  CHECK(plans[1].bands[0].listener == "far");
  CHECK(netem::plan({{"near", ep("0.0.0.0", 9444), {}}}, itfs).empty());
}

TEST_CASE("netem units and errors", "[netem]") {
  CHECK(netem::loss_probability(0) == 0);
  CHECK(netem::loss_probability(100) == 0xffffffffu);
  CHECK(netem::loss_probability(1) == 42949673u);  // 2^32 / 100, rounded
  CHECK(netem::loss_probability(150) == 0xffffffffu);

  const auto unknown = netem::describe_error(-NLE_OBJ_NOTFOUND, "add root prio qdisc on lo");
  CHECK_THAT(unknown.reason, Catch::Contains("Specified qdisc kind is unknown") && Catch::Contains("on lo"));
  CHECK_THAT(unknown.remedy, Catch::Contains("modprobe sch_netem"));
  const auto perm = netem::describe_error(-NLE_PERM, "add root prio qdisc on lo");
  CHECK_THAT(perm.reason, Catch::Contains("CAP_NET_ADMIN"));
  CHECK_THAT(perm.text(), Catch::Contains("AmbientCapabilities=CAP_NET_ADMIN"));
}
