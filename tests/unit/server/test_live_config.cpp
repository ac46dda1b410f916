// live_config: what a reload publishes is what sessions admit by, and a publish ends the sessions
// of users it removed (docs/configuration.md "Checking and reloading").
#include <catch2/catch.hpp>

#include <thread>

#include "server/live_config.hpp"
#include "core/wire/vless_codec.hpp"

using namespace vlessbench;

namespace {

std::shared_ptr<const config> with_users(std::initializer_list<uuid_bytes> ids) {
  auto cfg = std::make_shared<config>();
  int i = 0;
  for (const auto& id : ids) cfg->users.push_back(user_config{"u" + std::to_string(i++), id, vless::format_uuid(id)});
  return cfg;
}

}  // namespace

TEST_CASE("live_config: admission follows the published users, a publish ends removed users' sessions", "[reload]") {
  asio::io_context io;
  live_config live;
  const auto alice = vless::random_uuid();
  const auto bob = vless::random_uuid();
  CHECK_FALSE(live.admit(alice, io.get_executor(), [] {}));  // nothing published yet
  live.publish(with_users({alice, bob}));

  int alice_ended = 0, bob_ended = 0, bob2_ended = 0;
  auto a = live.admit(alice, io.get_executor(), [&] { ++alice_ended; });
  auto b = live.admit(bob, io.get_executor(), [&] { ++bob_ended; });
  auto b2 = live.admit(bob, io.get_executor(), [&] { ++bob2_ended; });
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE(b2);
  CHECK(live.admitted() == 3);

  CHECK(live.publish(with_users({alice})) == 2);
  CHECK(bob_ended == 0);  // posted to the session's executor, not run in place
  live.withdraw(*b2);     // this session ended before its ender ran: skipped
  io.run();
  CHECK(bob_ended == 1);
  CHECK(bob2_ended == 0);
  CHECK(alice_ended == 0);
  CHECK(live.admitted() == 1);
  CHECK_FALSE(live.admit(bob, io.get_executor(), [] {}));  // bob is gone for new sessions too
  CHECK(live.current()->users.size() == 1);

  // Publishing a config that still has alice ends nothing.
  CHECK(live.publish(with_users({bob, alice})) == 0);
  live.withdraw(*a);
  CHECK(live.admitted() == 0);
}

TEST_CASE("live_config: admissions on two threads against publishes on a third", "[reload]") {
  asio::io_context io1, io2;
  live_config live;
  const auto alice = vless::random_uuid();
  live.publish(with_users({alice}));
  std::atomic<int> admitted{0}, refused{0}, ended{0};
  std::atomic<bool> stop{false};
  auto session_thread = [&](asio::io_context& io) {
    for (int i = 0; i < 2000; ++i) {
      if (auto id = live.admit(alice, io.get_executor(), [&] { ++ended; })) {
        ++admitted;
        const user_admission held(live, *id);
        io.poll();  // run any ender posted meanwhile, as a session's thread would
      } else {
        ++refused;
      }
    }
    io.restart();
    io.poll();
  };
  std::thread publisher([&] {
    for (int i = 0; !stop; ++i) live.publish(i % 2 ? with_users({alice}) : with_users({}));
  });
  std::thread t1(session_thread, std::ref(io1));
  std::thread t2(session_thread, std::ref(io2));
  t1.join();
  t2.join();
  stop = true;
  publisher.join();
  CHECK(admitted + refused == 4000);
  CHECK(ended <= admitted);
  CHECK(live.admitted() == 0);  // every admission withdrawn
}
