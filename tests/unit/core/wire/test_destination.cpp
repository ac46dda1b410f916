#include <catch2/catch.hpp>

#include <string>

#include "core/wire/destination.hpp"

using namespace vlessbench;

TEST_CASE("address_from_bytes reads 4 and 16 bytes and nothing else", "[destination]") {
  const auto v4 = address_from_bytes(std::string("\xc0\xa8\xff\x00", 4));
  REQUIRE(v4);
  CHECK(v4->to_string() == "192.168.255.0");
  const std::string six("\x20\x01\x0d\xb8\0\0\0\0\0\0\0\0\0\0\0\x01", 16);
  const auto v6 = address_from_bytes(six);
  REQUIRE(v6);
  CHECK(v6->to_string() == "2001:db8::1");
  CHECK_FALSE(address_from_bytes(""));
  CHECK_FALSE(address_from_bytes("abc"));
  CHECK_FALSE(address_from_bytes(std::string(5, '\0')));
}

TEST_CASE("format_destination writes the log's host:port", "[destination]") {
  CHECK(format_destination(destination_for_host("2001:db8::1", 443)) == "[2001:db8::1]:443");
  CHECK(format_destination(destination_for_host("192.168.255.0", 53)) == "192.168.255.0:53");
  CHECK(format_destination(destination_for_host("example.com", 80)) == "example.com:80");
  destination shorter;  // bytes short of the type's length read as zeros
  shorter.type = address_type::ipv4;
  shorter.address = std::string("\x0a", 1);
  shorter.port = 1;
  CHECK(format_destination(shorter) == "10.0.0.0:1");
}

TEST_CASE("destination_for_host tells literals from names", "[destination]") {
  const auto v4 = destination_for_host("127.0.0.1", 80, network::udp);
  CHECK(v4.type == address_type::ipv4);
  CHECK(v4.net == network::udp);
  CHECK(v4.address == std::string("\x7f\0\0\x01", 4));
  CHECK(ip_of(v4)->to_string() == "127.0.0.1");
  const auto mapped = destination_for_host("::ffff:127.0.0.1", 80);
  CHECK(mapped.type == address_type::ipv6);
  CHECK(mapped.address.size() == 16);
  const auto name = destination_for_host("localhost", 80);
  CHECK(name.type == address_type::domain);
  CHECK(name.address == "localhost");
  CHECK_FALSE(ip_of(name));
  destination wrong;
  wrong.type = address_type::ipv6;
  wrong.address = std::string(4, '\1');
  CHECK_FALSE(ip_of(wrong));
}

TEST_CASE("destination_of names IPv4-mapped addresses as IPv4", "[destination]") {
  const auto d = destination_of(asio::ip::make_address("::ffff:10.1.2.3"), 53, network::udp);
  CHECK(d.type == address_type::ipv4);
  CHECK(format_destination(d) == "10.1.2.3:53");
  CHECK(d.net == network::udp);
  const auto six = destination_of(asio::ip::make_address("fd00::7"), 9, network::tcp);
  CHECK(six.type == address_type::ipv6);
  CHECK(format_destination(six) == "[fd00::7]:9");
}
