// The gRPC transport's two HTTP/2 halves against each other, in memory: the server side
// (server/transport/grpc_h2.hpp) and the one client's (core/client/gun_client.hpp), bytes passed by hand.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include "core/client/gun_client.hpp"
#include "server/transport/grpc_h2.hpp"

using namespace vlessbench;

namespace {

// Moves bytes both ways until neither side has anything to send (bounded).
void pump(gun::h2_client& c, grpc::h2_server& s) {
  for (int round = 0; round < 1000; ++round) {
    bool moved = false;
    const std::string up = c.take_output();
    if (!up.empty()) {
      s.feed(up.data(), up.size());
      moved = true;
    }
    std::string down;
    for (auto v = s.next_output(); !v.empty(); v = s.next_output()) down.append(v);
    if (!down.empty()) {
      c.feed(down.data(), down.size());
      moved = true;
    }
    if (!moved) return;
  }
  FAIL("pump did not settle");
}

const gun::request_target tun{"localhost", "example.Gun", true, false};

}  // namespace

TEST_CASE("grpc h2: a stream carries the VLESS bytes both ways and ends with grpc-status 0", "[grpc]") {
  grpc::h2_server server("example.Gun", {});
  gun::h2_client client(tun);
  client.send("hello");
  pump(client, server);
  auto opened = server.take_opened();
  REQUIRE(opened.size() == 1);
  auto& st = *opened[0];
  CHECK(st.in == "hello");
  CHECK(st.kind == gun::message_kind::hunk);
  CHECK(server.take_rejected().empty());
  server.consume(st, st.in.size());
  server.send(st, "world", 5);
  pump(client, server);
  CHECK(client.received() == "world");
  CHECK_FALSE(client.ended());
  server.finish(st, 0, "");
  pump(client, server);
  CHECK(client.ended());
  CHECK(client.error().empty());
  // The client had not ended its side: the server's RST_STREAM NO_ERROR closed the stream.
  CHECK(st.closed);
  CHECK(st.reset_code == 0);
  CHECK(server.open_streams() == 0);
  CHECK(server.failure().empty());
}

TEST_CASE("grpc h2: TunMulti and a framing violation's grpc-status 13", "[grpc]") {
  grpc::h2_server server("vlessbench", {});
  gun::h2_client client({"localhost", "vlessbench", false, true});
  client.send("abc");
  pump(client, server);
  auto opened = server.take_opened();
  REQUIRE(opened.size() == 1);
  CHECK(opened[0]->kind == gun::message_kind::multi_hunk);
  CHECK(opened[0]->in == "abc");
  server.finish(*opened[0], 13, "compressed_message");
  pump(client, server);
  CHECK(client.ended());
  CHECK(client.error() == "grpc-status 13: compressed_message");
}

TEST_CASE("grpc h2: another path, method or content type is refused with its reason", "[grpc]") {
  grpc::h2_server server("vlessbench", {});
  gun::h2_client client(tun);  // asks for /example.Gun/Tun
  client.send("x");
  pump(client, server);
  CHECK(server.take_opened().empty());
  const auto rejected = server.take_rejected();
  REQUIRE(rejected.size() == 1);
  CHECK(rejected[0].reason == "wrong_path");
  CHECK(rejected[0].detail == "/example.Gun/Tun");
  CHECK(client.ended());
  CHECK(client.error() == "404 wrong_path");
  CHECK(server.open_streams() == 0);
}

TEST_CASE("grpc h2: a session that does not read holds at most the stream window", "[grpc]") {
  grpc::h2_limits limits;
  limits.stream_window = 64 * 1024;
  grpc::h2_server server("example.Gun", limits);
  gun::h2_client client(tun);
  const std::string chunk(16 * 1024, 'x');
  for (int i = 0; i < 32; ++i) client.send(chunk);  // 512 KiB
  pump(client, server);
  auto opened = server.take_opened();
  REQUIRE(opened.size() == 1);
  auto& st = *opened[0];
  CHECK(client.send_blocked());
  CHECK(st.in.size() <= limits.stream_window);
  CHECK(st.in.size() > limits.stream_window / 2);
  // Taking the bytes opens the window again: the rest arrives as the session reads.
  std::size_t total = 0;
  for (int i = 0; i < 64 && total < 32 * chunk.size(); ++i) {
    total += st.in.size();
    server.consume(st, st.in.size());
    pump(client, server);
  }
  CHECK(total == 32 * chunk.size());
  CHECK_FALSE(client.send_blocked());
}

namespace {

std::string frame(std::uint8_t type, std::uint8_t flags, std::uint32_t stream, const std::string& payload) {
  std::string f;
  const auto n = static_cast<std::uint32_t>(payload.size());
  f += static_cast<char>(n >> 16);
  f += static_cast<char>(n >> 8);
  f += static_cast<char>(n);
  f += static_cast<char>(type);
  f += static_cast<char>(flags);
  for (int shift = 24; shift >= 0; shift -= 8) f += static_cast<char>(stream >> shift);
  return f + payload;
}

// HPACK: :method POST, :scheme http, :path and :authority literal, content-type literal.
std::string request_block(const std::string& path) {
  auto lit = [](std::string prefix, const std::string& v) { return prefix + static_cast<char>(v.size()) + v; };
  return std::string("\x83\x86") + lit("\x04", path) + lit("\x01", "localhost") + lit("\x0f\x10", "application/grpc");
}

}  // namespace

TEST_CASE("grpc h2: a rapid reset ends the connection with GOAWAY ENHANCE_YOUR_CALM", "[grpc]") {
  grpc::h2_server server("example.Gun", {});
  std::string wire = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, "");
  // 1,000 streams opened and reset at once (CVE-2023-44487), far over the burst of 200.
  for (std::uint32_t id = 1; id < 2000; id += 2)
    wire += frame(1, 0x4, id, request_block("/example.Gun/Tun")) + frame(3, 0, id, std::string("\0\0\0\x08", 4));
  server.feed(wire.data(), wire.size());
  std::string out;
  for (auto v = server.next_output(); !v.empty(); v = server.next_output()) out.append(v);
  std::uint32_t goaway_code = 0xffffffff;
  for (std::size_t at = 0; at + 9 <= out.size();) {
    const std::size_t n = (std::size_t{static_cast<std::uint8_t>(out[at])} << 16) |
                          (std::size_t{static_cast<std::uint8_t>(out[at + 1])} << 8) |
                          static_cast<std::uint8_t>(out[at + 2]);
    if (out[at + 3] == 7 && n >= 8) {
      goaway_code = 0;
      for (int i = 0; i < 4; ++i) goaway_code = (goaway_code << 8) | static_cast<std::uint8_t>(out[at + 9 + 4 + i]);
    }
    at += 9 + n;
  }
  CHECK(goaway_code == 0x0b);  // ENHANCE_YOUR_CALM, not INTERNAL_ERROR (2)
  CHECK(server.failure() == "h2_goaway_sent: ENHANCE_YOUR_CALM");
}

TEST_CASE("grpc h2: resets within the burst keep the connection", "[grpc]") {
  grpc::h2_server server("example.Gun", {});
  std::string wire = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, "");
  for (std::uint32_t id = 1; id < 2 * 150; id += 2)
    wire += frame(1, 0x4, id, request_block("/example.Gun/Tun")) + frame(3, 0, id, std::string("\0\0\0\x08", 4));
  CHECK(server.feed(wire.data(), wire.size()));
  for (auto v = server.next_output(); !v.empty(); v = server.next_output()) {
  }
  CHECK(server.failure().empty());
  CHECK_FALSE(server.done());
}
