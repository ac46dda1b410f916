// The route registry's contract (docs/sessions.md "How a route is matched"): a flow's full
// identity in one normal form, entries owned by the session that added them.
#include <catch2/catch.hpp>

#include "core/runtime/route_registry.hpp"

using namespace vlessbench;

namespace {

asio::ip::tcp::endpoint ep(const char* addr, unsigned short port) { return {asio::ip::make_address(addr), port}; }

std::shared_ptr<route_info> session(std::uint64_t id, const char* user) {
  auto info = std::make_shared<route_info>();
  info->session_id = id;
  info->user = user;
  return info;
}

}  // namespace

TEST_CASE("route_registry: one local port to two destinations is two flows", "[route]") {
  route_registry routes;
  const auto a = session(1, "alice");
  const route_registration to_a(routes, flow_id::tcp(ep("127.0.0.1", 40000), ep("127.0.0.1", 8080)), a);
  REQUIRE(to_a.owned());
  // A direct client that the kernel gave the same local port, to another target: not a relay.
  CHECK(routes.find(flow_id::tcp(ep("127.0.0.1", 40000), ep("127.0.0.1", 8081))) == nullptr);
  // Nor to the same port on another address.
  CHECK(routes.find(flow_id::tcp(ep("127.0.0.1", 40000), ep("10.0.0.1", 8080))) == nullptr);
  CHECK(routes.find(flow_id::tcp(ep("127.0.0.1", 40000), ep("127.0.0.1", 8080))) == a);

  const auto b = session(2, "bob");
  const route_registration to_b(routes, flow_id::tcp(ep("127.0.0.1", 40000), ep("127.0.0.1", 8081)), b);
  REQUIRE(to_b.owned());
  CHECK(routes.find(flow_id::tcp(ep("127.0.0.1", 40000), ep("127.0.0.1", 8080))) == a);
  CHECK(routes.find(flow_id::tcp(ep("127.0.0.1", 40000), ep("127.0.0.1", 8081))) == b);
  CHECK(routes.size() == 2);
}

TEST_CASE("route_registry: IPv4-mapped IPv6 and IPv4 are one address", "[route]") {
  route_registry routes;
  const auto a = session(7, "alice");
  // A session asked for ::ffff:127.0.0.1 dials from an IPv6 socket; the IPv4 target sees IPv4.
  const route_registration reg(routes, flow_id::tcp(ep("::ffff:127.0.0.1", 40001), ep("::ffff:127.0.0.1", 8080)), a);
  CHECK(routes.find(flow_id::tcp(ep("127.0.0.1", 40001), ep("127.0.0.1", 8080))) == a);
  CHECK(flow_id::tcp(ep("::ffff:10.1.2.3", 1), ep("::1", 2)) == flow_id::tcp(ep("10.1.2.3", 1), ep("::1", 2)));
  CHECK(to_string(reg.id()) == "tcp 127.0.0.1:40001->127.0.0.1:8080");
  CHECK(to_string(flow_id::tcp(ep("::1", 5), ep("::1", 6))) == "tcp [::1]:5->[::1]:6");
  // ::1 is not 127.0.0.1.
  CHECK(!(flow_id::tcp(ep("::1", 1), ep("::1", 2)) == flow_id::tcp(ep("127.0.0.1", 1), ep("127.0.0.1", 2))));
}

TEST_CASE("route_registry: entries are owned, a second owner is refused and removes nothing", "[route]") {
  route_registry routes;
  const auto id = flow_id::tcp(ep("127.0.0.1", 40002), ep("127.0.0.1", 8080));
  const auto alice = session(1, "alice");
  const auto bob = session(2, "bob");
  route_registration first(routes, id, alice);
  REQUIRE(first.owned());
  {
    const route_registration second(routes, id, bob);
    CHECK_FALSE(second.owned());
    CHECK(routes.find(id) == alice);  // not overwritten
  }
  CHECK(routes.find(id) == alice);  // not erased by the refused one going away
  routes.remove(id, bob.get());     // nor by anyone else's remove
  CHECK(routes.find(id) == alice);
  first.release();
  CHECK(routes.find(id) == nullptr);
  CHECK(routes.size() == 0);
  first.release();  // idempotent
  // Once free, the identity can be someone else's.
  const route_registration again(routes, id, bob);
  CHECK(again.owned());
  CHECK(routes.find(id) == bob);
}

TEST_CASE("route_registry: dials in flight are counted for their scope", "[route]") {
  route_registry r;
  CHECK(r.dials_in_flight() == 0);
  {
    const route_registry::dial a(r);
    CHECK(r.dials_in_flight() == 1);
    {
      const route_registry::dial b(r);
      CHECK(r.dials_in_flight() == 2);
    }
    CHECK(r.dials_in_flight() == 1);
  }
  CHECK(r.dials_in_flight() == 0);
}
