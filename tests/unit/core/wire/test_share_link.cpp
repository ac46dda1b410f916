#include <catch2/catch.hpp>

#include <string>

#include "core/wire/percent.hpp"
#include "core/wire/share_link.hpp"
#include "core/wire/vless_codec.hpp"

using namespace vlessbench;

namespace {

constexpr const char* uuid_text = "b831381d-6324-4d53-ad4f-8cda48b30811";

std::string link_with(const std::string& host_port, const std::string& query, const std::string& fragment = "") {
  return std::string("vless://") + uuid_text + "@" + host_port + "?" + query + fragment;
}

// Parses a link expected to be refused and returns the reason.
std::string refusal(const std::string& text) {
  std::string reason;
  const auto link = parse_share_link(text, reason);
  INFO(text);
  REQUIRE_FALSE(link);
  REQUIRE_FALSE(reason.empty());
  return reason;
}

}  // namespace

TEST_CASE("parse_share_link reads the v2rayN form", "[share_link]") {
  std::string reason = "stale";
  const auto link = parse_share_link(
      link_with("example.com:8443",
                "encryption=none&security=tls&sni=example.com&allowInsecure=1&type=tcp&flow=", "#My%20Node"),
      reason);
  REQUIRE(link);
  CHECK(reason.empty());
  CHECK(link->uuid == *vless::parse_uuid(uuid_text));
  CHECK(link->host == "example.com");
  CHECK(link->port == 8443);
  CHECK(link->transport.tls);
  CHECK(link->sni == "example.com");
  CHECK(link->allow_insecure);
  CHECK(link->flow.empty());
  CHECK(link->transport.kind == transport_kind::tls);
  CHECK(link->name == "My Node");
}

TEST_CASE("parse_share_link accepts the variants clients emit", "[share_link]") {
  std::string reason;
  SECTION("bracketed IPv6 host, defaults for absent keys") {
    const auto link = parse_share_link(link_with("[2001:db8::1]:443", "security=tls"), reason);
    REQUIRE(link);
    CHECK(link->host == "2001:db8::1");
    CHECK(link->port == 443);
    CHECK(link->sni.empty());
    CHECK_FALSE(link->allow_insecure);
    CHECK(link->transport.kind == transport_kind::tls);
    CHECK(link->name.empty());
  }
  SECTION("upper-case scheme and UUID, empty path before the query") {
    const auto link =
        parse_share_link("VLESS://B831381D-6324-4D53-AD4F-8CDA48B30811@127.0.0.1:8443/?security=tls", reason);
    REQUIRE(link);
    CHECK(link->uuid == *vless::parse_uuid(uuid_text));
    CHECK(link->host == "127.0.0.1");
  }
  SECTION("insecure alias and boolean spellings") {
    auto l = parse_share_link(link_with("h:1", "security=tls&insecure=true"), reason);
    REQUIRE(l);
    CHECK(l->allow_insecure);
    l = parse_share_link(link_with("h:1", "security=tls&allowInsecure=false"), reason);
    REQUIRE(l);
    CHECK_FALSE(l->allow_insecure);
    l = parse_share_link(link_with("h:1", "security=tls&allowInsecure=0&insecure=0"), reason);
    REQUIRE(l);
    CHECK_FALSE(l->allow_insecure);
    l = parse_share_link(link_with("h:1", "security=tls&allowInsecure=TRUE"), reason);
    REQUIRE(l);
    CHECK(l->allow_insecure);
  }
  SECTION("percent-decoded values and fragment, '+' kept literally") {
    const auto link =
        parse_share_link(link_with("h:65535", "security=tls&sni=ex%61mple.com&type=tcp&headerType=none&fp=chrome",
                                   "#%E6%B5%8B%E8%AF%95+a%23b"),
                         reason);
    REQUIRE(link);
    CHECK(link->port == 65535);
    CHECK(link->sni == "example.com");
    CHECK(link->name == "\xe6\xb5\x8b\xe8\xaf\x95+a#b");
  }
}

TEST_CASE("parse_share_link refuses malformed links with a reason", "[share_link]") {
  const std::string ok_query = "security=tls";
  CHECK_THAT(refusal(std::string("vmess://") + uuid_text + "@h:1?security=tls"), Catch::Contains("vless://"));
  CHECK_THAT(refusal("vless:/x"), Catch::Contains("vless://"));
  CHECK_THAT(refusal("vless://not-a-uuid@h:1?security=tls"), Catch::Contains("UUID"));
  CHECK_THAT(refusal("vless://b831381d63244d53ad4f8cda48b30811@h:1?security=tls"), Catch::Contains("UUID"));
  CHECK_THAT(refusal("vless://h:1?security=tls"), Catch::Contains("UUID@"));
  CHECK_THAT(refusal(link_with("h", ok_query)), Catch::Contains("server 'h': expected HOST:PORT"));
  CHECK_THAT(refusal(link_with("h:", ok_query)), Catch::Contains("port"));
  CHECK_THAT(refusal(link_with("h:0", ok_query)), Catch::Contains("port"));
  CHECK_THAT(refusal(link_with("h:65536", ok_query)), Catch::Contains("port"));
  CHECK_THAT(refusal(link_with("h:44a", ok_query)), Catch::Contains("port"));
  CHECK_THAT(refusal(link_with("h:-1", ok_query)), Catch::Contains("port"));
  CHECK_THAT(refusal(link_with("h:99999999999999999999", ok_query)), Catch::Contains("port"));
  CHECK_THAT(refusal(link_with(":443", ok_query)), Catch::Contains("empty host"));
  CHECK_THAT(refusal(link_with("[]:443", ok_query)), Catch::Contains("empty host"));
  CHECK_THAT(refusal(link_with("[::1:443", ok_query)), Catch::Contains("IPv6"));
  CHECK_THAT(refusal(link_with("[not-ip]:443", ok_query)), Catch::Contains("IPv6"));
  CHECK_THAT(refusal(link_with("[::1]443", ok_query)), Catch::Contains("[IPv6]:PORT"));
  CHECK_THAT(refusal(link_with("::1:443", ok_query)), Catch::Contains("brackets"));
  CHECK_THAT(refusal(link_with("a b:443", ok_query)), Catch::Contains("host"));
  CHECK_THAT(refusal(link_with("h:443/path", ok_query)), Catch::Contains("path"));
}

TEST_CASE("parse_share_link refuses what the built-in client cannot do", "[share_link]") {
  CHECK_THAT(refusal(link_with("h:1", "security=none")),
             Catch::Contains("security=none is not supported") && Catch::Contains("TLS only"));
  CHECK_THAT(refusal(link_with("h:1", "type=tcp")), Catch::Contains("security=none"));
  // REALITY links parse (the daemon prints them, `clients` hands them to cores); the runner's
  // path SPEC refuses them for the built-in client. One without the server's key is malformed.
  CHECK_THAT(refusal(link_with("h:1", "security=reality")), Catch::Contains("without pbk="));
  CHECK_THAT(refusal(link_with("h:1", "security=TLS")), Catch::Contains("security=TLS"));
  CHECK_THAT(refusal(link_with("h:1", "security=tls&type=quic")), Catch::Contains("type=quic is not supported"));
  CHECK_THAT(refusal(link_with("h:1", "security=tls&type=httpupgrade&ed=2048")), Catch::Contains("ed= is for type=ws"));
  CHECK_THAT(refusal(link_with("h:1", "security=tls&type=ws&ed=lots")), Catch::Contains("ed=lots"));
  CHECK_THAT(refusal(link_with("h:1", "security=tls&type=ws&path=%2Fws%3Fed%3D1&ed=2")), Catch::Contains("disagree"));
  CHECK_THAT(refusal(link_with("h:1", "security=none&type=tcp")), Catch::Contains("security=none"));
  CHECK_THAT(refusal(link_with("h:1", "security=tls&flow=xtls-rprx-direct")), Catch::Contains("only xtls-rprx-vision"));
  CHECK_THAT(refusal(link_with("h:1", "security=tls&type=ws&flow=xtls-rprx-vision")), Catch::Contains("raw TLS only"));
  CHECK_THAT(refusal(link_with("h:1", "security=tls&encryption=aes-128-gcm")),
             Catch::Contains("encryption=aes-128-gcm"));
  CHECK_THAT(refusal(link_with("h:1", "security=tls&headerType=http")), Catch::Contains("headerType=http"));
  CHECK_THAT(refusal(link_with("h:1", "security=tls&allowInsecure=yes")), Catch::Contains("allowInsecure=yes"));
  CHECK_THAT(refusal(link_with("h:1", "security=tls&allowInsecure=1&insecure=0")), Catch::Contains("disagree"));
}

TEST_CASE("parse_share_link refuses bad percent-encoding and repeated keys", "[share_link]") {
  CHECK_THAT(refusal(link_with("h:1", "security=tls&sni=a%zz")), Catch::Contains("sni"));
  CHECK_THAT(refusal(link_with("h:1", "security=tls&sni=a%4")), Catch::Contains("sni"));
  CHECK_THAT(refusal(link_with("h:1", "security=tls", "#name%")), Catch::Contains("name"));
  CHECK_THAT(refusal(link_with("h:1", "security=tls&sni=a&sni=b")), Catch::Contains("repeated"));
}

TEST_CASE("parse_share_link reads the ws and httpupgrade transports", "[share_link]") {
  std::string reason;
  auto link = parse_share_link(link_with("h:443", "security=tls&type=ws&path=%2Fws&host=cdn.example&ed=2048"), reason);
  REQUIRE(link);
  CHECK(link->transport.kind == transport_kind::ws);
  CHECK(link->transport.path == "/ws");
  CHECK(link->transport.host == "cdn.example");
  CHECK(link->transport.max_early_data == 2048);
  // Xray's early data in the path.
  link = parse_share_link(link_with("h:443", "security=tls&type=ws&path=%2Fws%3Fed%3D2048"), reason);
  REQUIRE(link);
  CHECK(link->transport.path == "/ws");
  CHECK(link->transport.max_early_data == 2048);
  // Plain TCP below the upgrade, and the default path.
  link = parse_share_link(link_with("h:80", "security=none&type=httpupgrade"), reason);
  REQUIRE(link);
  CHECK_FALSE(link->transport.tls);
  CHECK(link->transport.path == "/");
  CHECK(format_share_link(*link).find("&type=httpupgrade&path=%2F") != std::string::npos);
}

TEST_CASE("parse_share_link reads the grpc transport", "[share_link]") {
  std::string reason;
  auto link = parse_share_link(link_with("h:443", "security=tls&type=grpc&serviceName=example.Gun"), reason);
  REQUIRE(link);
  CHECK(link->transport.kind == transport_kind::grpc);
  CHECK(link->transport.service_name == "example.Gun");
  CHECK_FALSE(link->transport.grpc_multi);
  CHECK(format_share_link(*link).find("&type=grpc&serviceName=example.Gun") != std::string::npos);
  // h2c below, the default service name, mode=multi (TunMulti).
  link = parse_share_link(link_with("h:80", "security=none&type=grpc&mode=multi"), reason);
  REQUIRE(link);
  CHECK_FALSE(link->transport.tls);
  CHECK(link->transport.service_name == "vlessbench");
  CHECK(link->transport.grpc_multi);
  const auto again = parse_share_link(format_share_link(*link), reason);
  REQUIRE(again);
  CHECK(again->transport.grpc_multi);
  CHECK(again->transport.service_name == "vlessbench");
  CHECK_THAT(refusal(link_with("h:1", "security=tls&type=grpc&serviceName=a%2Fb")), Catch::Contains("serviceName"));
  CHECK_THAT(refusal(link_with("h:1", "security=tls&type=grpc&mode=stream")), Catch::Contains("mode=stream"));
  CHECK_THAT(refusal(link_with("h:1", "security=tls&type=grpc&ed=2048")), Catch::Contains("ed= is for type=ws"));
}

TEST_CASE("format_share_link emits a canonical link that parses back", "[share_link]") {
  share_link link;
  link.uuid = *vless::parse_uuid(uuid_text);
  link.host = "127.0.0.1";
  link.port = 8443;
  link.sni = "vlessbench.test";
  link.allow_insecure = true;
  link.name = "vlessbench quickack=on";
  const auto text = format_share_link(link);
  CHECK(text == std::string("vless://") + uuid_text +
                    "@127.0.0.1:8443?encryption=none&security=tls&sni=vlessbench.test"
                    "&allowInsecure=1&type=tcp#vlessbench%20quickack%3Don");

  for (const std::string& name : {std::string("a#b&c=d?e%f/g"), std::string("\xe6\xb5\x8b\xe8\xaf\x95 node"),
                                  std::string("+"), std::string("")}) {
    for (const std::string& host : {std::string("::1"), std::string("example.com")}) {
      share_link l = link;
      l.name = name;
      l.host = host;
      l.sni = "x&y=z";
      l.allow_insecure = name.empty();
      if (host == "::1") {
        l.transport.kind = transport_kind::ws;
        l.transport.path = "/a b?c";
        l.transport.host = "cdn.example";
        l.transport.max_early_data = 2048;
      }
      std::string reason;
      const auto back = parse_share_link(format_share_link(l), reason);
      INFO(format_share_link(l) << " -> " << reason);
      REQUIRE(back);
      CHECK(*back == l);
    }
  }
}

TEST_CASE("parse_share_link reads flow=xtls-rprx-vision on raw TLS, and formats it back", "[share_link]") {
  std::string reason;
  const auto link = parse_share_link(link_with("h:443", "security=tls&type=tcp&flow=xtls-rprx-vision"), reason);
  REQUIRE(link);
  CHECK(link->flow == "xtls-rprx-vision");
  const auto again = parse_share_link(format_share_link(*link), reason);
  REQUIRE(again);
  CHECK(*link == *again);
}

TEST_CASE("percent codec: round trip, strict and lenient decoding", "[share_link][percent]") {
  const std::string all = [] {
    std::string s;
    for (int c = 0; c < 256; ++c) s.push_back(static_cast<char>(c));
    return s;
  }();
  CHECK(percent_decode(percent_encode(all)) == all);
  CHECK(percent_encode("a b+c~") == "a%20b%2Bc~");
  CHECK(percent_decode("a%20b+c") == "a b+c");  // '+' is no space
  CHECK(percent_decode("%4a%4A") == "JJ");
  CHECK_FALSE(percent_decode("%").has_value());
  CHECK_FALSE(percent_decode("ab%4").has_value());
  CHECK_FALSE(percent_decode("%zz").has_value());
  // The admin token's: a '%' without two hex digits stays as it is, the rest is decoded.
  CHECK(percent_decode_lenient("t%zz%41+") == "t%zzA+");
  CHECK(percent_decode_lenient("%4") == "%4");
  CHECK(percent_decode_lenient("a%2Fb") == "a/b");
}
