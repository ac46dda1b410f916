// REALITY's check of a ClientHello (core/wire/reality.hpp, core/net/reality_auth.hpp) against a
// vector made independently of BoringSSL: python's `cryptography` (X25519, HKDF-SHA256,
// AES-GCM, HMAC-SHA512) sealed the session id of a hand-built ClientHello the way Xray's client
// does (server key 01..20, client key 65..84, version 25.9.11, time 1764900000, short id
// 0123abcd): tests/unit/core/net/reality_vector.py prints it.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "core/net/reality_auth.hpp"
#include "core/wire/reality.hpp"

using namespace vlessbench;

namespace {

std::vector<std::uint8_t> from_hex(const std::string& hex) {
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<std::uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

const std::string hello_hex =
    "010000b00303030a11181f262d343b424950575e656c737a81888f969da4abb2b9c0c7ced5dc207727da79f8ee245df9cc85ccda352713c2"
    "b4e99eeac91dbce2162784eb412e5400021301010000650000001c001a0000177265616c6974792e766c65737362656e63682e7465737400"
    "0a00060004001d0017003300260024001d00205714769d116bf76436ae74bc793d2c30ad1903c59ac5273805c7e2698b410c36002b000302"
    "0304000d0006000404030804";
const std::string auth_hex = "44452af9ecc1a5c70251f2cefbf92c8b0f3a1a7cb445dc3ef1223959f2a606fa";
constexpr std::int64_t client_time_ms = 1764900000LL * 1000;

reality::settings vector_settings() {
  reality::settings s;
  const auto key = from_hex("0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20");
  std::copy(key.begin(), key.end(), s.private_key.begin());
  s.server_names = {"reality.vlessbench.test"};
  s.short_ids = {*reality::parse_short_id("0123abcd")};
  return s;
}

}  // namespace

TEST_CASE("reality: the vector authenticates, with its AuthKey and claim") {
  const auto msg = from_hex(hello_hex);
  const auto facts = reality::read_hello_facts(msg);
  REQUIRE(facts.complete());
  CHECK(facts.value.tls13);
  CHECK(facts.value.hello.server_name == "reality.vlessbench.test");
  CHECK(facts.value.x25519.size() == 32);
  CHECK_FALSE(facts.value.mlkem_share_first);
  const auto out = reality::authenticate(vector_settings(), facts.value, client_time_ms + 2000);
  REQUIRE(out.why == reality::refusal::none);
  CHECK(std::vector<std::uint8_t>(out.auth_key.begin(), out.auth_key.end()) == from_hex(auth_hex));
  CHECK(out.claim.version == std::array<std::uint8_t, 3>{25, 9, 11});
  CHECK(out.claim.unix_time == 1764900000u);
  CHECK(reality::encode_key(reality::public_key(vector_settings().private_key)) ==
        "B6N8vBQgk8i3VdwbEOhstCY3StFqqFPtC9_AsrhtHHw");
}

TEST_CASE("reality: each refusal names its reason") {
  const auto msg = from_hex(hello_hex);
  const auto facts = reality::read_hello_facts(msg).value;
  auto s = vector_settings();
  SECTION("another server key") {
    s.private_key[1] ^= 1;  // not byte 0's low bits: X25519 clears them (clamping)
    CHECK(reality::authenticate(s, facts, client_time_ms).why == reality::refusal::auth_failed);
  }
  SECTION("an SNI not in server_names") {
    s.server_names = {"www.example.com"};
    CHECK(reality::authenticate(s, facts, client_time_ms).why == reality::refusal::server_name);
  }
  SECTION("an unknown short id") {
    s.short_ids = {*reality::parse_short_id("")};
    CHECK(reality::authenticate(s, facts, client_time_ms).why == reality::refusal::unknown_short_id);
  }
  SECTION("a clock too far off") {
    s.max_time_diff_ms = 60'000;
    CHECK(reality::authenticate(s, facts, client_time_ms + 30'000).why == reality::refusal::none);
    CHECK(reality::authenticate(s, facts, client_time_ms + 120'000).why == reality::refusal::time_diff);
    CHECK(reality::authenticate(s, facts, client_time_ms - 120'000).why == reality::refusal::time_diff);
  }
  SECTION("require_mlkem_share without an X25519MLKEM768 share") {
    s.require_mlkem_share = true;
    CHECK(reality::authenticate(s, facts, client_time_ms).why == reality::refusal::mlkem_required);
  }
  SECTION("one changed byte of the ClientHello") {
    auto changed = msg;
    changed[60] ^= 1;  // inside the cipher suites' neighbourhood: the additional data differs
    const auto f = reality::read_hello_facts(changed);
    if (f.complete()) CHECK(reality::authenticate(s, f.value, client_time_ms).why != reality::refusal::none);
  }
}

TEST_CASE("reality: the certificate's signature field is HMAC-SHA512(AuthKey, its ed25519 key)") {
  const reality::listener_state state(vector_settings());
  reality::key32 auth{};
  const auto a = from_hex(auth_hex);
  std::copy(a.begin(), a.end(), auth.begin());
  const auto one = state.certificate_for(auth);
  auth[0] ^= 1;
  const auto two = state.certificate_for(auth);
  REQUIRE(one.size() == two.size());
  // Only the last 64 bytes (the signature) depend on the AuthKey.
  CHECK(std::equal(one.begin(), one.end() - 64, two.begin()));
  CHECK_FALSE(std::equal(one.end() - 64, one.end(), two.end() - 64));
}

TEST_CASE("reality: replay memory remembers a bounded number of randoms") {
  reality::replay_memory m(2);
  const std::vector<std::uint8_t> a(32, 1), b(32, 2), c(32, 3);
  CHECK(m.first_use(a));
  CHECK_FALSE(m.first_use(a));
  CHECK(m.first_use(b));
  CHECK(m.first_use(c));  // a is forgotten
  CHECK(m.first_use(a));
}
