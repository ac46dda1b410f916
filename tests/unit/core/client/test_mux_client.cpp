// core/client/mux_client's sub_table: the client side of Mux.Cool without sockets.
// Frames the client writes are read back with the codec (core/wire/mux_frame, tested
// against the protocol's layout); frames "from the server" are encoded with it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "core/client/mux_client.hpp"
#include "core/net/tls.hpp"

using namespace vlessbench;

namespace {

std::vector<mux::frame> frames_of(const std::string& bytes, std::vector<std::string>& data) {
  std::vector<mux::frame> out;
  std::string_view rest = bytes;
  while (!rest.empty()) {
    const auto r = mux::parse_mux_frame(rest);
    REQUIRE(r.complete());
    out.push_back(r.value);
    data.emplace_back(r.value.data);
    rest.remove_prefix(r.consumed);
  }
  return out;
}

std::string server_keep(std::uint16_t id, std::string_view data, const mux::target* from = nullptr) {
  mux::frame f;
  f.id = id;
  f.st = mux::status::keep;
  f.option = mux::option_data;
  f.data = data;
  if (from) f.dest = *from;
  std::string out;
  mux::encode_mux_frame(out, f);
  return out;
}

std::string server_frame(std::uint16_t id, mux::status st, std::uint8_t option = 0) {
  mux::frame f;
  f.id = id;
  f.st = st;
  f.option = option;
  std::string out;
  mux::encode_mux_frame(out, f);
  return out;
}

std::string take_all(mux::sub_table& t, std::uint16_t id) {
  std::string out;
  char buf[7];
  while (const auto n = t.take(id, buf, sizeof buf)) out.append(buf, n);
  return out;
}

}  // namespace

TEST_CASE("mux client: make_target writes literals as raw bytes and names as domains", "[mux]") {
  const auto v4 = mux::make_target(mux::network::tcp, "127.0.0.1", 8080);
  REQUIRE(v4);
  CHECK(v4->type == mux::address_type::ipv4);
  CHECK(v4->address == std::string("\x7f\x00\x00\x01", 4));
  CHECK(mux::format_target(*v4) == "127.0.0.1:8080");
  const auto v6 = mux::make_target(mux::network::udp, "::1", 53);
  REQUIRE(v6);
  CHECK(v6->type == mux::address_type::ipv6);
  CHECK(v6->address.size() == 16);
  CHECK(mux::format_target(*v6) == "[::1]:53");
  const auto name = mux::make_target(mux::network::tcp, "example.com", 443);
  REQUIRE(name);
  CHECK(name->type == mux::address_type::domain);
  CHECK(name->address == "example.com");
  CHECK_FALSE(mux::make_target(mux::network::tcp, "", 80));
  CHECK_FALSE(mux::make_target(mux::network::tcp, "a", 0));
  CHECK_FALSE(mux::make_target(mux::network::tcp, std::string(256, 'a'), 80));
}

TEST_CASE(
    "mux client: the VLESS request of a mux connection is command 3 with "
    "no address",
    "[mux]") {
  const auto uuid = *vless::parse_uuid("27848739-7e62-4138-9fd3-098a63964b6b");
  const std::string wire = vless::encode_request(mux::vless_request(uuid));
  // version, uuid, addons length 0, command 3: nothing after (v2ray/Xray send
  // no address for mux).
  REQUIRE(wire.size() == 1 + 16 + 1 + 1);
  CHECK(wire.back() == 3);
  const auto back = vless::parse_request(wire);
  REQUIRE(back.complete());
  CHECK(back.consumed == wire.size());
  CHECK(back.value.dest.address == vless::mux_domain);
}

TEST_CASE("mux client: New carries the target and the first data, ids count from 1", "[mux]") {
  mux::sub_table t;
  const auto dest = *mux::make_target(mux::network::tcp, "127.0.0.1", 80);
  std::string out;
  const auto a = t.open(out, dest, "GET / HTTP/1.1\r\n\r\n");
  const auto b = t.open(out, dest);
  REQUIRE(a);
  REQUIRE(b);
  CHECK(*a == 1);
  CHECK(*b == 2);
  std::vector<std::string> data;
  const auto fs = frames_of(out, data);
  REQUIRE(fs.size() == 2);
  CHECK(fs[0].st == mux::status::new_sub);
  CHECK(fs[0].id == 1);
  CHECK(fs[0].has_data());
  CHECK(data[0] == "GET / HTTP/1.1\r\n\r\n");
  REQUIRE(fs[0].dest);
  CHECK(*fs[0].dest == dest);
  CHECK_FALSE(fs[0].global_id);
  CHECK(fs[1].st == mux::status::new_sub);
  CHECK_FALSE(fs[1].has_data());  // a New without data: the option bit is clear
  CHECK(t.open_count() == 2);
  CHECK(t.opened() == 2);
}

TEST_CASE("mux client: data past 65535 bytes goes on in Keep frames", "[mux]") {
  mux::sub_table t;
  const auto dest = *mux::make_target(mux::network::tcp, "10.0.0.1", 443);
  std::string out;
  const std::string big(70000, 'x');
  const auto id = t.open(out, dest, big);
  REQUIRE(id);
  std::vector<std::string> data;
  const auto fs = frames_of(out, data);
  REQUIRE(fs.size() == 2);
  CHECK(data[0].size() == 65535);
  CHECK(fs[1].st == mux::status::keep);
  CHECK_FALSE(fs[1].dest);  // a TCP Keep names no target
  CHECK(data[1].size() == 70000 - 65535);

  out.clear();
  data.clear();
  CHECK(t.write(out, *id, std::string(3 * 65535 + 1, 'y')));
  const auto more = frames_of(out, data);
  CHECK(more.size() == 4);
  CHECK(data.back().size() == 1);
  CHECK_FALSE(t.write(out, 99, "z"));  // never opened
}

TEST_CASE(
    "mux client: End is sent once, forgets the sub, and its id is free "
    "again later",
    "[mux]") {
  mux::sub_table t(2);
  const auto dest = *mux::make_target(mux::network::tcp, "127.0.0.1", 80);
  std::string out;
  const auto a = t.open(out, dest);
  const auto b = t.open(out, dest);
  CHECK_FALSE(t.open(out, dest));  // the cap
  out.clear();
  CHECK(t.end(out, *a));
  CHECK_FALSE(t.end(out, *a));
  std::vector<std::string> data;
  const auto fs = frames_of(out, data);
  REQUIRE(fs.size() == 1);
  CHECK(fs[0].st == mux::status::end);
  CHECK(fs[0].id == *a);
  CHECK_FALSE(t.is_open(*a));
  const auto c = t.open(out, dest);
  REQUIRE(c);
  CHECK(*c == 3);  // ids move on; a freed id comes back only after the wrap
  CHECK(*b == 2);
}

TEST_CASE("mux client: ids wrap past 65535 to 1 and skip ids still open", "[mux]") {
  mux::sub_table t(4);
  const auto dest = *mux::make_target(mux::network::tcp, "127.0.0.1", 80);
  std::string out;
  const auto first = t.open(out, dest);  // id 1 stays open
  REQUIRE(first);
  for (int i = 0; i < 65533; ++i) {
    const auto id = t.open(out, dest);
    REQUIRE(id);
    t.end(out, *id);
    out.clear();
  }
  const auto last = t.open(out, dest);
  REQUIRE(last);
  CHECK(*last == 65535);
  const auto wrapped = t.open(out, dest);
  REQUIRE(wrapped);
  CHECK(*wrapped == 2);  // 0 is never used, 1 is still open
}

TEST_CASE(
    "mux client: the server's frames are demultiplexed by id, whole or "
    "split anywhere",
    "[mux]") {
  const auto dest = *mux::make_target(mux::network::tcp, "127.0.0.1", 80);
  std::string wire = server_keep(2, "second") + server_frame(0, mux::status::keep_alive) + server_keep(1, "first ") +
                     server_keep(1, "sub") + server_frame(2, mux::status::end);
  for (std::size_t cut = 0; cut <= wire.size(); ++cut) {
    mux::sub_table t;
    std::string out;
    const auto a = t.open(out, dest);
    const auto b = t.open(out, dest);
    REQUIRE(a);
    REQUIRE(b);
    REQUIRE(t.feed(std::string_view(wire).substr(0, cut)).empty());
    REQUIRE(t.feed(std::string_view(wire).substr(cut)).empty());
    CHECK(take_all(t, *a) == "first sub");
    CHECK(take_all(t, *b) == "second");
    CHECK_FALSE(t.remote_ended(*a));
    CHECK(t.remote_ended(*b));
    CHECK_FALSE(t.remote_error(*b));
    CHECK(t.keep_alives() == 1);
  }
}

TEST_CASE("mux client: End with the error option, late data and unknown ids", "[mux]") {
  mux::sub_table t;
  const auto dest = *mux::make_target(mux::network::tcp, "127.0.0.1", 80);
  std::string out;
  const auto a = t.open(out, dest);
  const auto b = t.open(out, dest);
  REQUIRE(t.feed(server_frame(*a, mux::status::end, mux::option_error)).empty());
  CHECK(t.remote_ended(*a));
  CHECK(t.remote_error(*a));
  // Data after the server's End, and for subs we ended or never had, is dropped
  // and counted.
  t.end(out, *b);
  REQUIRE(t.feed(server_keep(*a, "late") + server_keep(*b, "gone") + server_keep(77, "never")).empty());
  CHECK(t.dropped_bytes() == 4 + 4 + 5);
  CHECK_FALSE(t.has_data(*a));
  CHECK(t.remote_ended(*b));  // not open: nothing more will come
}

TEST_CASE(
    "mux client: a server that sends New or a bad frame makes the "
    "connection unusable",
    "[mux]") {
  mux::sub_table t;
  mux::frame f;
  f.id = 1;
  f.st = mux::status::new_sub;
  f.dest = mux::make_target(mux::network::tcp, "127.0.0.1", 80);
  std::string wire;
  mux::encode_mux_frame(wire, f);
  CHECK(t.feed(wire) == "new_from_server");
  mux::sub_table u;
  CHECK(u.feed(std::string("\x00\x04\x00\x01\x09\x00", 6)) == "unknown_status");
}

TEST_CASE("mux client: a sub's unread bytes are bounded", "[mux]") {
  mux::sub_table t(8, 10);
  const auto dest = *mux::make_target(mux::network::tcp, "127.0.0.1", 80);
  std::string out;
  const auto a = t.open(out, dest);
  REQUIRE(t.feed(server_keep(*a, "0123456789")).empty());
  CHECK(t.feed(server_keep(*a, "!")) == "sub_buffer_overflow");
}

TEST_CASE(
    "mux client: UDP subs keep datagrams apart, XUDP packets carry their "
    "own address",
    "[mux]") {
  mux::sub_table t;
  const auto dns = *mux::make_target(mux::network::udp, "127.0.0.1", 53);
  const auto echo = *mux::make_target(mux::network::udp, "127.0.0.1", 7);
  const std::array<std::uint8_t, 8> gid{1, 2, 3, 4, 5, 6, 7, 8};
  std::string out;
  const auto plain = t.open(out, dns, "query");
  const auto x = t.open(out, dns, "q1", true, gid);
  REQUIRE(plain);
  REQUIRE(x);
  CHECK(t.write_packet(out, *plain, "again"));
  CHECK(t.write_packet(out, *x, "q2", &echo));
  CHECK(t.write_packet(out, *x, "q3"));
  CHECK_FALSE(t.write_packet(out, *x, std::string(65536, 'x')));  // one datagram, one frame
  std::vector<std::string> data;
  const auto fs = frames_of(out, data);
  REQUIRE(fs.size() == 5);
  CHECK_FALSE(fs[0].global_id);
  REQUIRE(fs[1].global_id);
  CHECK(*fs[1].global_id == gid);
  CHECK_FALSE(fs[2].dest);  // a plain UDP sub: packets go to the New frame's target
  REQUIRE(fs[3].dest);
  CHECK(*fs[3].dest == echo);
  CHECK(data[3] == "q2");
  REQUIRE(fs[4].dest);
  CHECK(*fs[4].dest == dns);  // XUDP without an explicit target: the sub's own

  CHECK_FALSE(t.open(out, dns, std::string(65536, 'x')));  // an oversized first datagram

  REQUIRE(t.feed(server_keep(*plain, "a1") + server_keep(*plain, "a2") + server_keep(*x, "r", &echo)).empty());
  const auto p1 = t.take_packet(*plain);
  const auto p2 = t.take_packet(*plain);
  REQUIRE(p1);
  REQUIRE(p2);
  CHECK(p1->data == "a1");
  CHECK(p2->data == "a2");
  CHECK_FALSE(p1->from);
  CHECK_FALSE(t.take_packet(*plain));
  const auto r = t.take_packet(*x);
  REQUIRE(r);
  CHECK(r->data == "r");
  REQUIRE(r->from);
  CHECK(*r->from == echo);
}

// mux::connection against a scripted Mux.Cool server on loopback (TLS): the command 3 header
// with the first New frame, two subs read at the same time (one reads the connection, the
// other waits and gets its frames filed), the replies in the opposite order, End with error.
namespace {

struct mux_fixture {
  asio::io_context io;
  asio::ssl::context server_tls = tls::make_server_context(tls_config{});
  tcp::acceptor acceptor{io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)};
  vless::client_plan plan;
  std::vector<mux::frame> seen;  // what the server read (data not kept)
  std::string header_seen;

  mux_fixture() {
    tls::client_options opts;
    opts.sni = "localhost";
    plan = vless::make_client_plan(acceptor.local_endpoint(), opts,
                                   mux::vless_request(*vless::parse_uuid("b831381d-6324-4d53-ad4f-8cda48b30811")));
  }

  // Reads the header and frames until two News with data are in, then answers sub 2 before
  // sub 1 in one write, and ends sub 1 with the error option.
  awaitable<void> serve() {
    auto socket = co_await acceptor.async_accept(use_awaitable);
    asio::ssl::stream<tcp::socket> s(std::move(socket), server_tls);
    co_await s.async_handshake(asio::ssl::stream_base::server, use_awaitable);
    std::string in;
    char buf[4096];
    std::size_t news = 0;
    while (news < 2) {
      const auto n = co_await s.async_read_some(asio::buffer(buf), use_awaitable);
      in.append(buf, n);
      if (header_seen.empty()) {
        if (in.size() < plan.header.size()) continue;
        header_seen = in.substr(0, plan.header.size());
        in.erase(0, plan.header.size());
      }
      for (;;) {
        const auto r = mux::parse_mux_frame(in);
        if (!r.complete()) break;
        seen.push_back(r.value);
        seen.back().data = {};
        if (r.value.st == mux::status::new_sub) ++news;
        in.erase(0, r.consumed);
      }
    }
    std::string out(2, '\0');  // the VLESS response header
    mux::frame f;
    f.st = mux::status::keep;
    f.option = mux::option_data;
    f.id = 2;
    f.data = "reply two";
    mux::encode_mux_frame(out, f);
    f.id = 1;
    f.data = "reply one";
    mux::encode_mux_frame(out, f);
    f.st = mux::status::end;
    f.option = mux::option_error;
    mux::encode_mux_frame(out, f);
    co_await asio::async_write(s, asio::buffer(out), use_awaitable);
    // Hold the connection until the client closes it.
    for (;;) {
      auto [ec, n] = co_await s.async_read_some(asio::buffer(buf), as_tuple_awaitable);
      if (ec) break;
    }
  }

  // Reads the header and `frames` frames (kept in seen, without data), then holds the
  // connection until the client closes it.
  awaitable<void> collect(std::size_t frames) {
    auto socket = co_await acceptor.async_accept(use_awaitable);
    asio::ssl::stream<tcp::socket> s(std::move(socket), server_tls);
    co_await s.async_handshake(asio::ssl::stream_base::server, use_awaitable);
    std::string in;
    char buf[4096];
    bool header = false;
    for (;;) {
      auto [ec, n] = co_await s.async_read_some(asio::buffer(buf), as_tuple_awaitable);
      if (ec) break;
      in.append(buf, n);
      if (!header) {
        if (in.size() < plan.header.size()) continue;
        in.erase(0, plan.header.size());
        header = true;
      }
      for (;;) {
        const auto r = mux::parse_mux_frame(in);
        if (!r.complete() || seen.size() == frames) break;
        seen.push_back(r.value);
        seen.back().data = {};
        in.erase(0, r.consumed);
      }
    }
  }
};

}  // namespace

TEST_CASE("mux client: a connection demultiplexes replies to subs read at the same time", "[mux]") {
  mux_fixture f;
  mux::connection c(f.io.get_executor(), f.plan);
  const auto dest = *mux::make_target(mux::network::tcp, "127.0.0.1", 8080);
  std::string one, two;
  std::error_code end_one, end_two, open_ec;
  std::uint16_t a = 0, b = 0;
  int done = 0;
  // Sub 1 reads until its End; sub 2 (never ended) until its reply is in.
  auto read_sub = [&](std::uint16_t id, std::string& got, std::error_code& last) -> awaitable<void> {
    char buf[64];
    for (int i = 0; i < 8 && !(id == 2 && got.size() >= 9); ++i) {  // bounded
      std::size_t n = 0;
      last = co_await c.read_some(id, buf, sizeof buf, n);
      if (last) break;
      got.append(buf, n);
    }
    if (++done == 2) c.close();
  };
  asio::co_spawn(f.io, f.serve(), asio::detached);
  asio::co_spawn(
      f.io,
      [&]() -> awaitable<void> {
        if ((open_ec = co_await c.connect())) co_return;
        if ((open_ec = co_await c.handshake())) co_return;
        if ((open_ec = co_await c.open(dest, "first", a))) co_return;
        if ((open_ec = co_await c.open(dest, "second", b))) co_return;
        asio::co_spawn(f.io, read_sub(a, one, end_one), asio::detached);
        asio::co_spawn(f.io, read_sub(b, two, end_two), asio::detached);
      },
      asio::detached);
  f.io.run_for(std::chrono::seconds(10));
  REQUIRE_FALSE(open_ec);
  CHECK(a == 1);
  CHECK(b == 2);
  CHECK(f.header_seen == f.plan.header);  // the command 3 header, with the first frame
  REQUIRE(f.seen.size() >= 2);
  CHECK(f.seen[0].st == mux::status::new_sub);
  CHECK(f.seen[0].id == 1);
  CHECK(f.seen[1].id == 2);
  CHECK(one == "reply one");
  CHECK(two == "reply two");
  CHECK(end_one == mux::errc::sub_error);  // ended by the server with the error option
  CHECK(done == 2);
}

TEST_CASE("mux client: a connection carries UDP and XUDP subs a datagram at a time", "[mux]") {
  mux_fixture f;
  mux::connection c(f.io.get_executor(), f.plan);
  const auto dest = *mux::make_target(mux::network::udp, "127.0.0.1", 53);
  const std::array<std::uint8_t, 8> gid{9, 8, 7, 6, 5, 4, 3, 2};
  std::error_code open_ec, first_one, second_one, got_two, write_ec;
  mux::packet one, two, after;
  std::uint16_t a = 0, b = 0;
  asio::co_spawn(f.io, f.serve(), asio::detached);
  asio::co_spawn(
      f.io,
      [&]() -> awaitable<void> {
        if ((open_ec = co_await c.connect())) co_return;
        if ((open_ec = co_await c.handshake())) co_return;
        if ((open_ec = co_await c.open_udp(dest, "query one", false, std::nullopt, a))) co_return;
        if ((open_ec = co_await c.open_udp(dest, "query two", true, gid, b))) co_return;
        write_ec = co_await c.write_packet(b, "again");
        got_two = co_await c.read_packet(b, two);       // reads both replies, files sub 1's
        first_one = co_await c.read_packet(a, one);     // already filed
        second_one = co_await c.read_packet(a, after);  // then the server's End (error)
        c.close();
      },
      asio::detached);
  f.io.run_for(std::chrono::seconds(10));
  REQUIRE_FALSE(open_ec);
  CHECK_FALSE(write_ec);
  REQUIRE(f.seen.size() >= 2);
  CHECK(f.seen[0].st == mux::status::new_sub);
  REQUIRE(f.seen[0].dest);
  CHECK(f.seen[0].dest->net == mux::network::udp);
  CHECK_FALSE(f.seen[0].global_id);
  REQUIRE(f.seen[1].global_id);  // the XUDP sub's New frame
  CHECK(*f.seen[1].global_id == gid);
  CHECK_FALSE(got_two);
  CHECK(two.data == "reply two");
  CHECK_FALSE(first_one);
  CHECK(one.data == "reply one");
  CHECK(second_one == mux::errc::sub_error);
}

TEST_CASE("mux client: subs writing at the same time take turns", "[mux]") {
  // Two subs each writing in a loop: a writer that just wrote lets the waiting one go next, so
  // the second sub's data does not wait for all of the first's.
  constexpr int writes = 20;
  mux_fixture f;
  mux::connection c(f.io.get_executor(), f.plan);
  const auto dest = *mux::make_target(mux::network::tcp, "127.0.0.1", 8080);
  std::error_code open_ec, write_ec;
  int done = 0;
  auto write_sub = [&](std::uint16_t id) -> awaitable<void> {
    for (int i = 0; i < writes && !write_ec; ++i) write_ec = co_await c.write(id, std::string(100, 'w'));
    if (++done == 2) {
      c.end(1);
      c.end(2);
      (void)co_await c.flush();
      c.close();
    }
  };
  asio::co_spawn(f.io, f.collect(2 + 2 * writes), asio::detached);
  asio::co_spawn(
      f.io,
      [&]() -> awaitable<void> {
        std::uint16_t a = 0, b = 0;
        if ((open_ec = co_await c.connect())) co_return;
        if ((open_ec = co_await c.handshake())) co_return;
        if ((open_ec = co_await c.open(dest, "", a))) co_return;
        if ((open_ec = co_await c.open(dest, "", b))) co_return;
        asio::co_spawn(f.io, write_sub(a), asio::detached);
        asio::co_spawn(f.io, write_sub(b), asio::detached);
      },
      asio::detached);
  f.io.run_for(std::chrono::seconds(10));
  REQUIRE_FALSE(open_ec);
  REQUIRE_FALSE(write_ec);
  CHECK(done == 2);
  REQUIRE(f.seen.size() == 2 + 2 * writes);
  std::vector<std::uint16_t> keeps;
  for (const auto& fr : f.seen)
    if (fr.st == mux::status::keep) keeps.push_back(fr.id);
  REQUIRE(keeps.size() == 2 * writes);
  const auto first_two = std::find(keeps.begin(), keeps.end(), 2);
  const auto last_one = std::find(keeps.rbegin(), keeps.rend(), 1);
  REQUIRE(first_two != keeps.end());
  CHECK(first_two - keeps.begin() < keeps.rend() - last_one - 1);  // sub 2 began before sub 1 ended
  int switches = 0;
  for (std::size_t i = 1; i < keeps.size(); ++i) switches += keeps[i] != keeps[i - 1] ? 1 : 0;
  CHECK(switches >= writes);  // taking turns, not one sub's writes then the other's
}
