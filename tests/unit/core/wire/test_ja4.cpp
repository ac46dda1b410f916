// JA4 from hand-built ClientHello bodies (core/wire/ja4.hpp). Expected values: the published example
// and hash vectors of FoxIO's technical_details/JA4.md, and for the other cases the spec's rules
// applied by hand (hashes from `python3 -c "import hashlib; print(hashlib.sha256(b'...').hexdigest()[:12])"`).
#include <catch2/catch.hpp>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "core/wire/ja4.hpp"

using namespace vlessbench;

namespace {

using bytes_t = std::vector<std::uint8_t>;

void put16(bytes_t& out, std::uint16_t v) {
  out.push_back(static_cast<std::uint8_t>(v >> 8));
  out.push_back(static_cast<std::uint8_t>(v & 0xff));
}

bytes_t list16(std::initializer_list<std::uint16_t> values, bool long_length) {
  bytes_t out;
  const std::size_t n = values.size() * 2;
  if (long_length) {
    put16(out, static_cast<std::uint16_t>(n));
  } else {
    out.push_back(static_cast<std::uint8_t>(n));
  }
  for (const auto v : values) put16(out, v);
  return out;
}

bytes_t alpn(std::initializer_list<std::string> protocols) {
  bytes_t list;
  for (const auto& p : protocols) {
    list.push_back(static_cast<std::uint8_t>(p.size()));
    list.insert(list.end(), p.begin(), p.end());
  }
  bytes_t out;
  put16(out, static_cast<std::uint16_t>(list.size()));
  out.insert(out.end(), list.begin(), list.end());
  return out;
}

bytes_t sni(const std::string& host) {
  bytes_t out;
  put16(out, static_cast<std::uint16_t>(host.size() + 3));
  out.push_back(0);
  put16(out, static_cast<std::uint16_t>(host.size()));
  out.insert(out.end(), host.begin(), host.end());
  return out;
}

using extension = std::pair<std::uint16_t, bytes_t>;

// A ClientHello body: legacy version, zero random, a 32-byte session id, the ciphers, null
// compression, the extensions in the given order (none at all when with_extensions is false).
bytes_t hello(std::uint16_t legacy, std::initializer_list<std::uint16_t> ciphers,
              const std::vector<extension>& extensions, bool with_extensions = true) {
  bytes_t out;
  put16(out, legacy);
  out.insert(out.end(), 32, 0x11);
  out.push_back(32);
  out.insert(out.end(), 32, 0x22);
  const bytes_t c = list16(ciphers, true);
  out.insert(out.end(), c.begin(), c.end());
  out.push_back(1);
  out.push_back(0);
  if (!with_extensions) return out;
  bytes_t exts;
  for (const auto& [type, body] : extensions) {
    put16(exts, type);
    put16(exts, static_cast<std::uint16_t>(body.size()));
    exts.insert(exts.end(), body.begin(), body.end());
  }
  put16(out, static_cast<std::uint16_t>(exts.size()));
  out.insert(out.end(), exts.begin(), exts.end());
  return out;
}

const bytes_t spec_sigalgs = list16({0x0403, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501, 0x0806, 0x0601}, true);

// The ClientHello of JA4.md's example: its ciphers and extensions in their order, with GREASE
// added at the places Chromium puts it (a cipher, an extension first and last, a version).
bytes_t spec_example(const bytes_t& sigalgs = spec_sigalgs) {
  return hello(0x0303,
               {0x3a3a, 0x1301, 0x1302, 0x1303, 0xc02b, 0xc02f, 0xc02c, 0xc030, 0xcca9, 0xcca8, 0xc013, 0xc014, 0x009c,
                0x009d, 0x002f, 0x0035},
               {{0x8a8a, {}},
                {0x001b, {0x02, 0x00, 0x02}},
                {0x0000, sni("example.com")},
                {0x0033, {0x00, 0x00}},
                {0x0010, alpn({"h2", "http/1.1"})},
                {0x4469, {}},
                {0x0017, {}},
                {0x002d, {0x01, 0x01}},
                {0x000d, sigalgs},
                {0x0005, {0x01, 0x00, 0x00, 0x00, 0x00}},
                {0x0023, {}},
                {0x0012, {}},
                {0x002b, list16({0x5a5a, 0x0304, 0x0303}, false)},
                {0xff01, {0x00}},
                {0x000b, {0x01, 0x00}},
                {0x000a, list16({0x6a6a, 0x001d, 0x0017}, true)},
                {0x0015, {0x00, 0x00}},
                {0x9a9a, {0x00}}});
}

std::string ja4(const bytes_t& body) {
  std::string_view reason;
  std::string out = ja4_of_client_hello(body, &reason);
  if (out.empty()) return "!" + std::string(reason);
  return out;
}

}  // namespace

TEST_CASE("ja4: the spec's example ClientHello and its hash vectors", "[ja4]") {
  CHECK(ja4(spec_example()) == "t13d1516h2_8daaf6152771_e5627efa2ab1");
  // "If there are no signature algorithms ... the string ends without an underscore": 6d807ffa2a79.
  CHECK(ja4(spec_example(list16({}, true))) == "t13d1516h2_8daaf6152771_6d807ffa2a79");
}

TEST_CASE("ja4: the parsed fields keep GREASE, the fingerprint leaves it out", "[ja4]") {
  const auto r = parse_client_hello(spec_example());
  REQUIRE(r.complete());
  CHECK(r.consumed == spec_example().size());
  CHECK(r.value.cipher_suites.size() == 16);
  CHECK(r.value.extensions.size() == 18);
  CHECK(r.value.has_sni);
  CHECK(r.value.alpn_first == "h2");
  CHECK(r.value.supported_versions == std::vector<std::uint16_t>{0x5a5a, 0x0304, 0x0303});
  CHECK(is_grease(0x0a0a));
  CHECK(is_grease(0xfafa));
  CHECK_FALSE(is_grease(0x0a1a));
  CHECK_FALSE(is_grease(0x1301));
  // A GREASE version above 0x0304 numerically is not the highest version.
  auto h = r.value;
  h.supported_versions = {0xfafa, 0x0303};
  CHECK(ja4_fingerprint(h).substr(0, 4) == "t12d");
  CHECK(ja4_fingerprint(h, ja4_protocol::quic).substr(0, 4) == "q12d");
}

TEST_CASE("ja4: TLS 1.2 without supported_versions, SNI or ALPN", "[ja4]") {
  const bytes_t body = hello(0x0303, {0xc02f, 0xc030, 0x009c, 0x00ff},
                             {{0x000b, {0x01, 0x00}},
                              {0x000a, list16({0x0017}, true)},
                              {0x000d, list16({0x0401, 0x0501, 0x0201}, true)},
                              {0x0023, {}}});
  // ciphers sorted: 009c,00ff,c02f,c030; extensions: 000a,000b,000d,0023_0401,0501,0201.
  CHECK(ja4(body) == "t12i040400_fe3406f53c8c_ee474d4735ba");
}

TEST_CASE("ja4: an old ClientHello without extensions, and one without ciphers", "[ja4]") {
  CHECK(ja4(hello(0x0301, {0x002f}, {}, false)).substr(0, 11) == "t10i010000_");
  CHECK(ja4(hello(0x0301, {0x002f}, {}, false)).substr(23) == "_000000000000");
  CHECK(ja4(hello(0x0303, {}, {}, false)) == "t12i000000_000000000000_000000000000");
  CHECK(ja4(hello(0x0300, {0x000a}, {}, false)).substr(0, 4) == "ts3i");
  CHECK(ja4(hello(0x9999, {0x000a}, {}, false)).substr(0, 4) == "t00i");
  // Only GREASE values: nothing counted, nothing hashed.
  CHECK(ja4(hello(0x0303, {0x0a0a}, {{0x1a1a, {}}})) == "t12i000000_000000000000_000000000000");
}

TEST_CASE("ja4: the first ALPN value's characters, or its hex digits, or 00", "[ja4]") {
  auto alpn_part = [](std::initializer_list<std::string> protocols) {
    return ja4(hello(0x0303, {0x1301}, {{0x0010, alpn(protocols)}})).substr(8, 2);
  };
  CHECK(alpn_part({"http/1.1", "h2"}) == "h1");
  CHECK(alpn_part({"h2"}) == "h2");
  CHECK(alpn_part({"x"}) == "xx");
  CHECK(alpn_part({}) == "00");
  CHECK(alpn_part({""}) == "00");
  // JA4.md's examples for non-alphanumeric bytes.
  CHECK(alpn_part({"\xab"}) == "ab");
  CHECK(alpn_part({"\xab\xcd"}) == "ad");
  CHECK(alpn_part({"\x30\xab"}) == "3b");
  CHECK(alpn_part({"\x30\x31\xab\xcd"}) == "3d");
  CHECK(alpn_part({"\x30\xab\xcd\x31"}) == "01");
  CHECK(ja4(hello(0x0303, {0x1301}, {})).substr(8, 2) == "00");
}

TEST_CASE("ja4: counts stop at 99, SNI and ALPN count but are not hashed", "[ja4]") {
  client_hello h;
  h.legacy_version = 0x0303;
  for (std::uint16_t i = 0; i < 120; ++i) h.cipher_suites.push_back(static_cast<std::uint16_t>(0x1000 + i));
  h.extensions = {0x0000, 0x0010, 0x0017};
  h.has_sni = true;
  h.alpn_first = "h2";
  const std::string with = ja4_fingerprint(h);
  CHECK(with.substr(0, 10) == "t12d9903h2");
  h.extensions = {0x0017};
  h.has_sni = false;
  h.alpn_first.clear();
  const std::string without = ja4_fingerprint(h);
  CHECK(without.substr(0, 10) == "t12i990100");
  CHECK(with.substr(10) == without.substr(10));  // same b and c sections
}

TEST_CASE("ja4: malformed ClientHellos are refused with a reason, never read past", "[ja4]") {
  const bytes_t good = spec_example();
  // Every cut of a valid hello is refused (the cut at the end of compression is a valid hello
  // without extensions, so it is skipped).
  const std::size_t no_extensions = 2 + 32 + 1 + 32 + 2 + 16 * 2 + 2;
  for (std::size_t n = 0; n < good.size(); ++n) {
    if (n == no_extensions) continue;
    const auto r = parse_client_hello(std::span(good.data(), n));
    CHECK(r.invalid());
    CHECK_FALSE(r.reason.empty());
  }
  CHECK(parse_client_hello(std::span(good.data(), no_extensions)).complete());
  bytes_t trailing = good;
  trailing.push_back(0);
  CHECK(ja4(trailing) == "!trailing bytes after the extensions");
  bytes_t long_session = good;
  long_session[34] = 33;
  CHECK(ja4(long_session) == "!bad session id");
  CHECK(ja4(hello(0x0303, {0x1301}, {{0x002b, {0x03, 0x03, 0x04}}})) == "!bad supported_versions");
  CHECK(ja4(hello(0x0303, {0x1301}, {{0x000d, {0x00, 0x02, 0x04}}})) == "!bad signature_algorithms");
  CHECK(ja4(hello(0x0303, {0x1301}, {{0x0010, {0x00, 0x03, 0x05, 'h', '2'}}})) == "!bad alpn");
  CHECK(ja4(hello(0x0303, {0x1301}, {{0x0010, {0x00, 0x01, 0x05}}})) == "!bad alpn");
  bytes_t odd_ciphers = hello(0x0303, {0x1301}, {}, false);
  odd_ciphers[68] = 3;  // cipher list length 3
  CHECK(ja4(odd_ciphers).substr(0, 1) == "!");
}
