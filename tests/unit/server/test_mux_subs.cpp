// The Mux.Cool sub-connection table (server/mux_subs.hpp): what the session does with each frame.
#include <catch2/catch.hpp>

#include "server/mux_subs.hpp"

using namespace vlessbench;
using namespace vlessbench::mux;

namespace {

frame make_new(std::uint16_t id, network net = network::tcp, std::string address = std::string("\x7f\0\0\x01", 4),
               address_type type = address_type::ipv4) {
  frame f;
  f.id = id;
  f.st = status::new_sub;
  f.dest = target{.net = net, .port = 80, .type = type, .address = std::move(address)};
  return f;
}

frame make(std::uint16_t id, status st, bool data = false) {
  frame f;
  f.id = id;
  f.st = st;
  f.option = data ? option_data : 0;
  if (data) f.data = "x";
  return f;
}

}  // namespace

TEST_CASE(
    "mux subs: New opens numbered subs, Keep delivers, End frees the id "
    "for reuse",
    "[mux]") {
  sub_table t(4);
  auto d = t.on_frame(make_new(1));
  CHECK(d.act == action::open);
  CHECK(d.sub == 1u);
  d = t.on_frame(make_new(2, network::udp));
  CHECK(d.act == action::open);
  CHECK(d.sub == 2u);
  REQUIRE(t.find(2) != nullptr);
  CHECK(t.find(2)->net == network::udp);
  CHECK_FALSE(t.find(2)->xudp);
  CHECK(t.live() == 2u);

  d = t.on_frame(make(1, status::keep, true));
  CHECK(d.act == action::deliver);
  CHECK(d.sub == 1u);
  CHECK(t.on_frame(make(1, status::keep_alive)).act == action::ignore);

  d = t.on_frame(make(1, status::end));
  CHECK(d.act == action::end);
  CHECK(d.sub == 1u);
  CHECK(t.live() == 1u);
  // A frame that crossed the End: nothing.
  CHECK(t.on_frame(make(1, status::keep, true)).act == action::ignore);
  CHECK(t.on_frame(make(1, status::end)).act == action::ignore);
  // The id is free again: a New after End opens a new sub with the next number.
  d = t.on_frame(make_new(1));
  CHECK(d.act == action::open);
  CHECK(d.sub == 3u);
  CHECK(t.opened() == 3u);
}

TEST_CASE("mux subs: hostile frames are refused or end their sub, with reasons", "[mux]") {
  sub_table t(2);
  // Frames for an id never opened.
  auto d = t.on_frame(make(9, status::keep, true));
  CHECK(d.act == action::stray);
  CHECK(d.reason == "unknown_sub");
  CHECK(t.on_frame(make(9, status::end)).act == action::stray);
  // Mux inside mux.
  d = t.on_frame(make_new(3, network::tcp, std::string(mux_cool_domain), address_type::domain));
  CHECK(d.act == action::refuse);
  CHECK(d.reason == "mux_in_mux");
  CHECK(t.live() == 0u);
  // New for a live id: the live one ends with an error.
  REQUIRE(t.on_frame(make_new(1)).act == action::open);
  d = t.on_frame(make_new(1));
  CHECK(d.act == action::kill);
  CHECK(d.sub == 1u);
  CHECK(d.reason == "duplicate_new");
  CHECK(t.live() == 0u);
  // The cap.
  REQUIRE(t.on_frame(make_new(1)).act == action::open);
  REQUIRE(t.on_frame(make_new(2)).act == action::open);
  d = t.on_frame(make_new(3));
  CHECK(d.act == action::refuse);
  CHECK(d.reason == "too_many_subs");
  // One closed by the server makes room, and its late frames are nothing.
  t.closed(2);
  CHECK(t.on_frame(make(2, status::keep, true)).act == action::ignore);
  CHECK(t.on_frame(make_new(3)).act == action::open);
  // A target on a TCP sub's Keep.
  frame k = make(1, status::keep, true);
  k.dest = make_new(1).dest;
  d = t.on_frame(k);
  CHECK(d.act == action::kill);
  CHECK(d.reason == "address_on_tcp_keep");
}

TEST_CASE("mux subs: an XUDP sub's data carries its target, plain UDP may go without", "[mux]") {
  sub_table t(8);
  frame x = make_new(0, network::udp);
  x.global_id = std::array<std::uint8_t, 8>{1, 2, 3, 4, 5, 6, 7, 8};
  REQUIRE(t.on_frame(x).act == action::open);
  REQUIRE(t.find(0) != nullptr);
  CHECK(t.find(0)->xudp);
  frame k = make(0, status::keep, true);
  k.dest = x.dest;
  CHECK(t.on_frame(k).act == action::deliver);
  CHECK(t.on_frame(make(0, status::keep, false)).act == action::deliver);  // no data: no target needed
  const auto d = t.on_frame(make(0, status::keep, true));
  CHECK(d.act == action::kill);
  CHECK(d.reason == "xudp_missing_address");

  REQUIRE(t.on_frame(make_new(5, network::udp)).act == action::open);
  CHECK(t.on_frame(make(5, status::keep, true)).act == action::deliver);
  k.id = 5;
  CHECK(t.on_frame(k).act == action::deliver);  // a per-packet target on plain UDP: taken
}
