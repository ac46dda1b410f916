// core/wire/mux_frame: Mux.Cool frames byte for byte, from the protocol's public description (frame =
// u16 metadata length, metadata, [u16 data length, data]; metadata = u16 id, status, option,
// [network, u16 port, address type, address], [XUDP global id]).
#include <catch2/catch.hpp>

#include <string>

#include "core/wire/mux_frame.hpp"

using namespace vlessbench;
using namespace std::string_literals;

namespace {

std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int x : b) s += static_cast<char>(x);
  return s;
}

mux::frame parsed(const std::string& in) {
  const auto r = mux::parse_mux_frame(in);
  REQUIRE(r.complete());
  CHECK(r.consumed == in.size());
  std::string again;
  mux::encode_mux_frame(again, r.value);
  CHECK(again == in);  // canonical
  return r.value;
}

std::string_view reason(const std::string& in) {
  const auto r = mux::parse_mux_frame(in);
  REQUIRE(r.invalid());
  return r.reason;
}

}  // namespace

TEST_CASE("mux frame: New TCP sub-connection to an IPv4 target, with and without data", "[mux]") {
  const std::string head = bytes({0x00, 0x0c, 0x00, 0x01, 0x01, 0x00, 0x01, 0x00, 0x50, 0x01, 0x7f, 0x00, 0x00, 0x01});
  const auto f = parsed(head);
  CHECK(f.id == 1);
  CHECK(f.st == mux::status::new_sub);
  CHECK_FALSE(f.has_data());
  REQUIRE(f.dest);
  CHECK(f.dest->net == mux::network::tcp);
  CHECK(mux::format_target(*f.dest) == "127.0.0.1:80");
  CHECK_FALSE(f.global_id);

  std::string with_data = head;
  with_data[5] = 0x01;  // option D
  with_data += bytes({0x00, 0x03}) + "GET";
  const auto g = parsed(with_data);
  CHECK(g.has_data());
  CHECK(g.data == "GET");
  // Every proper prefix asks for more, never an error.
  for (std::size_t n = 0; n < with_data.size(); ++n) CHECK(mux::parse_mux_frame(with_data.substr(0, n)).need_more());
}

TEST_CASE("mux frame: Keep, End with error, KeepAlive", "[mux]") {
  const std::string keep_bytes = bytes({0x00, 0x04, 0x00, 0x07, 0x02, 0x01, 0x00, 0x03}) + "abc";
  const auto keep = parsed(keep_bytes);  // its data is a view into keep_bytes
  CHECK(keep.id == 7);
  CHECK(keep.st == mux::status::keep);
  CHECK(keep.data == "abc");
  CHECK_FALSE(keep.dest);
  const auto end = parsed(bytes({0x00, 0x04, 0x00, 0x07, 0x03, 0x02}));
  CHECK(end.st == mux::status::end);
  CHECK(end.error());
  const auto alive = parsed(bytes({0x00, 0x04, 0x00, 0x00, 0x04, 0x00}));
  CHECK(alive.st == mux::status::keep_alive);
  // Two frames back to back: the first is read alone.
  const std::string two = bytes({0x00, 0x04, 0x00, 0x07, 0x03, 0x00, 0x00, 0x04, 0x00, 0x08, 0x03, 0x00});
  const auto r = mux::parse_mux_frame(two);
  REQUIRE(r.complete());
  CHECK(r.consumed == 6);
  CHECK(r.value.id == 7);
}

TEST_CASE("mux frame: XUDP New with a domain and a global id, Keep with a per-packet IPv6 target", "[mux]") {
  const std::string xnew = bytes({0x00, 0x19, 0x00, 0x02, 0x01, 0x00, 0x02, 0x00, 0x35, 0x02, 0x08}) + "dns.test" +
                           bytes({1, 2, 3, 4, 5, 6, 7, 8});
  const auto f = parsed(xnew);
  REQUIRE(f.dest);
  CHECK(f.dest->net == mux::network::udp);
  CHECK(mux::format_target(*f.dest) == "dns.test:53");
  REQUIRE(f.global_id);
  CHECK((*f.global_id)[0] == 1);
  CHECK((*f.global_id)[7] == 8);

  std::string xkeep = bytes({0x00, 0x18, 0x00, 0x02, 0x02, 0x01, 0x02, 0x00, 0x35, 0x03});
  xkeep += std::string(15, '\0') + bytes({1});
  xkeep += bytes({0x00, 0x02}) + "hi";
  const auto k = parsed(xkeep);
  REQUIRE(k.dest);
  CHECK(mux::format_target(*k.dest) == "[::1]:53");
  CHECK(k.data == "hi");
}

TEST_CASE("mux frame: violations are refused with a reason", "[mux]") {
  CHECK(reason(bytes({0x00, 0x03, 0x00, 0x01, 0x02})) == "metadata_too_short");
  CHECK(reason(bytes({0x02, 0x00})) == "metadata_too_long");
  CHECK(reason(bytes({0x00, 0x04, 0x00, 0x01, 0x05, 0x00})) == "unknown_status");
  CHECK(reason(bytes({0x00, 0x04, 0x00, 0x01, 0x02, 0x04})) == "unknown_option_bits");
  CHECK(reason(bytes({0x00, 0x04, 0x00, 0x01, 0x01, 0x00})) == "new_without_target");
  CHECK(reason(bytes({0x00, 0x0c, 0x00, 0x01, 0x01, 0x00, 0x03, 0x00, 0x50, 0x01, 0x7f, 0, 0, 1})) ==
        "unknown_network");
  CHECK(reason(bytes({0x00, 0x0c, 0x00, 0x01, 0x01, 0x00, 0x01, 0x00, 0x50, 0x04, 0x7f, 0, 0, 1})) ==
        "unknown_address_type");
  CHECK(reason(bytes({0x00, 0x09, 0x00, 0x01, 0x01, 0x00, 0x01, 0x00, 0x50, 0x02, 0x00})) == "empty_domain");
  CHECK(reason(bytes({0x00, 0x0c, 0x00, 0x01, 0x01, 0x00, 0x01, 0x00, 0x00, 0x01, 0x7f, 0, 0, 1})) == "port_zero");
  CHECK(reason(bytes({0x00, 0x14, 0x00, 0x01, 0x01, 0x00, 0x01, 0x00, 0x50, 0x01, 0x7f,
                      0,    0,    1,    1,    2,    3,    4,    5,    6,    7,    8})) == "global_id_on_tcp");
  // The metadata length cuts the address short, or leaves bytes after it.
  CHECK(reason(bytes({0x00, 0x0a, 0x00, 0x01, 0x01, 0x00, 0x01, 0x00, 0x50, 0x01, 0x7f, 0})) == "bad_metadata_length");
  CHECK(reason(bytes({0x00, 0x05, 0x00, 0x01, 0x03, 0x00, 0x00})) == "bad_metadata_length");
  CHECK(reason(bytes({0x00, 0x0d, 0x00, 0x01, 0x01, 0x00, 0x01, 0x00, 0x50, 0x01, 0x7f, 0, 0, 1, 9})) ==
        "bad_metadata_length");
}
