#include <catch2/catch.hpp>

#include "core/runtime/udp_guard.hpp"

using namespace vlessbench;
using udp = asio::ip::udp;

TEST_CASE("udp guard: reflector ports and port 0 are refused", "[udp_guard]") {
  const udp::endpoint local(asio::ip::make_address("10.0.0.1"), 5300);
  for (std::uint16_t p : {0, 7, 19, 53, 123, 1900, 5353, 11211})
    CHECK(udp_source_refusal(udp::endpoint(asio::ip::make_address("192.0.2.9"), p), local, {}) == "reflector_port");
  CHECK(udp_source_refusal(udp::endpoint(asio::ip::make_address("192.0.2.9"), 40000), local, {}).empty());
}

TEST_CASE("udp guard: the daemon's own ports only from a local address", "[udp_guard]") {
  const udp::endpoint local(asio::ip::make_address("10.0.0.1"), 5300);
  const std::vector<std::uint16_t> own = {5300, 5301};
  CHECK(udp_source_refusal(udp::endpoint(asio::ip::make_address("127.0.0.1"), 5301), local, own) == "own_listener");
  CHECK(udp_source_refusal(udp::endpoint(asio::ip::make_address("10.0.0.1"), 5300), local, own) == "own_listener");
  CHECK(udp_source_refusal(udp::endpoint(asio::ip::make_address("::ffff:10.0.0.1"), 5300), local, own) ==
        "own_listener");
  CHECK(udp_source_refusal(udp::endpoint(asio::ip::make_address("192.0.2.9"), 5300), local, own).empty());
}

TEST_CASE("udp guard: echo answers and DNS responses", "[udp_guard]") {
  CHECK(is_udp_echo_answer("abc\nVLESSBENCH-UDP udp direct"));
  CHECK_FALSE(is_udp_echo_answer("abc"));
  CHECK(is_dns_response(std::string_view("\x00\x01\x80\x00", 4)));
  CHECK_FALSE(is_dns_response(std::string_view("\x00\x01\x01\x00", 4)));
  CHECK_FALSE(is_dns_response(std::string_view("\x00\x01", 2)));
}
