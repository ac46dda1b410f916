// The one transport spec (core/wire/transport_spec.hpp): the [[vless]] transport keys read
// through parse_config, and the share-link query format+parse pair.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/config/config.hpp"
#include "core/wire/percent.hpp"
#include "core/wire/transport_spec.hpp"

using namespace vlessbench;

TEST_CASE("transport keys: defaults and each transport", "[config][transport]") {
  const std::string head = "[[users]]\nname = \"u\"\nuuid = \"0bc2f2bd-f35f-4c1e-8b9b-befe527996d0\"\n";
  const config c = parse_config(head +
                                    "[[vless]]\nname = \"tls\"\nlisten = \"127.0.0.1:1\"\n"
                                    "[[vless]]\nname = \"ws\"\nlisten = \"127.0.0.1:2\"\ntransport = \"ws\"\n"
                                    "path = \"/ws\"\nhost = \"cdn.example\"\nmax_early_data = 2048\n"
                                    "early_data_header = \"X-Early\"\n"
                                    "[[vless]]\nname = \"up\"\nlisten = \"127.0.0.1:3\"\ntransport = \"httpupgrade\"\n"
                                    "tls = false\n",
                                "x.toml");
  REQUIRE(c.vless.size() == 3);
  CHECK(c.vless[0].transport == transport_spec{});
  CHECK(c.vless[0].transport.kind == transport_kind::tls);
  const auto& ws = c.vless[1].transport;
  CHECK(ws.kind == transport_kind::ws);
  CHECK(ws.tls);
  CHECK(ws.path == "/ws");
  CHECK(ws.host == "cdn.example");
  CHECK(ws.max_early_data == 2048u);
  CHECK(ws.early_data_header == "X-Early");
  const auto& up = c.vless[2].transport;
  CHECK(up.kind == transport_kind::httpupgrade);
  CHECK_FALSE(up.tls);
  CHECK(up.path == "/");
  CHECK(to_string(up.kind) == "httpupgrade");
}

TEST_CASE("transport keys: refusals name the key", "[config][transport]") {
  transport_spec out;
  auto first_error = [&](const transport_keys& keys) {
    const auto errors = validate_transport(keys, out);
    return errors.empty() ? std::string("(none)") : errors.front().first + ": " + errors.front().second;
  };
  CHECK(first_error({.transport = "tls", .tls = false}) ==
        "tls: only for transport = \"ws\", \"httpupgrade\", \"grpc\" or \"xhttp\"");
  CHECK(first_error({.transport = "grpc", .path = "/x"}) ==
        "path: only for transport = \"ws\", \"httpupgrade\" or \"xhttp\"");
  CHECK(first_error({.transport = "ws", .service_name = "x"}) == "service_name: only for transport = \"grpc\"");
  CHECK(first_error({.transport = "grpc", .service_name = "a/b"}) ==
        "service_name: \"a/b\": expected 1-128 letters, digits, '-', '.', '_' or '~' (no '/')");
  CHECK(first_error({.transport = "grpc", .service_name = ""}).rfind("service_name:", 0) == 0);
  CHECK(first_error({.transport = "ws", .max_early_data = -1}) == "max_early_data: expected 0..8192 bytes");
  CHECK(first_error({.transport = "ws", .max_early_data = 8193}) == "max_early_data: expected 0..8192 bytes");
  CHECK(first_error({.transport = "ws", .early_data_header = "Bad Header"}) ==
        "early_data_header: \"Bad Header\": not an HTTP header name");
  CHECK(first_error({.transport = "ws", .path = "/a?b"}).rfind("path:", 0) == 0);
  CHECK(first_error({.transport = "ws", .path = "/ws", .max_early_data = 8192}) == "(none)");
}

TEST_CASE("transport keys: grpc with its service name, over TLS or h2c", "[config][transport]") {
  transport_spec out;
  CHECK(validate_transport({.transport = "grpc"}, out).empty());
  CHECK(out.kind == transport_kind::grpc);
  CHECK(out.tls);
  CHECK(out.service_name == "vlessbench");
  CHECK(to_string(out.kind) == "grpc");
  CHECK(validate_transport({.transport = "grpc", .tls = false, .service_name = "example.Gun_1"}, out).empty());
  CHECK_FALSE(out.tls);
  CHECK(out.service_name == "example.Gun_1");
}

namespace {

// transport_query as a link's query text (percent-encoded, joined by '&').
std::string query_text(const transport_spec& t) {
  std::string out;
  for (const auto& [key, value] : transport_query(t))
    out += (out.empty() ? "" : "&") + std::string(key) + "=" + percent_encode(value);
  return out;
}

std::optional<transport_spec> parse_text(const std::string& text, std::string& reason) {
  query_params params;
  if (!parse_query(text, params, reason)) return std::nullopt;
  return parse_transport_query(params, reason);
}

std::string refusal(const std::string& text) {
  std::string reason;
  INFO(text);
  REQUIRE_FALSE(parse_text(text, reason));
  REQUIRE_FALSE(reason.empty());
  return reason;
}

// Every transport, over TLS and plain TCP where it may run so, with each of its options set.
std::vector<transport_spec> every_transport() {
  std::vector<transport_spec> out;
  out.push_back({});  // raw TLS (type=tcp)
  for (const bool tls : {true, false}) {
    for (const auto kind : {transport_kind::ws, transport_kind::httpupgrade}) {
      transport_spec t;
      t.kind = kind;
      t.tls = tls;
      out.push_back(t);
      t.path = "/a b/\xc3\xbc?c&d=e#f";
      out.push_back(t);
      t.host = "cdn.example";
      out.push_back(t);
      if (kind == transport_kind::ws) {
        for (const std::uint32_t ed : {1u, 2048u, 100000u}) {
          t.max_early_data = ed;
          out.push_back(t);
        }
      }
    }
    transport_spec g;
    g.kind = transport_kind::grpc;
    g.tls = tls;
    out.push_back(g);
    g.service_name = "example.Gun_1~";
    out.push_back(g);
    g.grpc_multi = true;
    out.push_back(g);
  }
  return out;
}

}  // namespace

TEST_CASE("transport spec: the share-link query round-trips every transport and option", "[transport][share_link]") {
  const auto all = every_transport();
  CHECK(all.size() == 25);
  for (const auto& t : all) {
    const std::string text = query_text(t);
    std::string reason = "stale";
    const auto back = parse_text(text, reason);
    INFO(describe(t) << " -> " << text << " -> " << reason);
    REQUIRE(back);
    CHECK(reason.empty());
    CHECK(*back == t);
    CHECK(query_text(*back) == text);
  }
  // Distinct specs format to distinct queries (nothing the link carries is lost).
  for (std::size_t i = 0; i < all.size(); ++i)
    for (std::size_t j = i + 1; j < all.size(); ++j) CHECK(query_text(all[i]) != query_text(all[j]));
}

TEST_CASE("transport spec: the query as links print it", "[transport][share_link]") {
  transport_spec t;
  CHECK(query_text(t) == "security=tls&type=tcp");
  t.kind = transport_kind::ws;
  t.path = "/ws";
  t.host = "cdn.example";
  t.max_early_data = 2048;
  t.early_data_header = "X-Early";  // not a link's: the client entries name it
  CHECK(query_text(t) == "security=tls&type=ws&path=%2Fws&host=cdn.example&ed=2048");
  t.kind = transport_kind::httpupgrade;
  t.tls = false;
  t.max_early_data = 0;
  t.host.clear();
  CHECK(query_text(t) == "security=none&type=httpupgrade&path=%2Fws");
  transport_spec g;
  g.kind = transport_kind::grpc;
  g.grpc_multi = true;
  CHECK(query_text(g) == "security=tls&type=grpc&serviceName=vlessbench&mode=multi");
  CHECK(link_type(transport_kind::tls) == "tcp");
  CHECK(link_type(transport_kind::httpupgrade) == "httpupgrade");
}

TEST_CASE("transport spec: parse reads the forms clients emit", "[transport][share_link]") {
  std::string reason;
  // Absent type: raw TCP with TLS; options of other transports ignored there.
  auto t = parse_text("security=tls&path=%2Fx&serviceName=s&mode=multi", reason);
  REQUIRE(t);
  CHECK(*t == transport_spec{});
  // Xray's early data in the path; an empty path is "/"; host= read.
  t = parse_text("security=none&type=ws&path=%2Fws%3Fed%3D2048&host=h", reason);
  REQUIRE(t);
  CHECK(t->kind == transport_kind::ws);
  CHECK_FALSE(t->tls);
  CHECK(t->path == "/ws");
  CHECK(t->host == "h");
  CHECK(t->max_early_data == 2048u);
  t = parse_text("security=tls&type=ws&path=%2F%3Fed%3D7&ed=7", reason);
  REQUIRE(t);
  CHECK(t->path == "/");
  CHECK(t->max_early_data == 7u);
  t = parse_text("security=tls&type=httpupgrade&path=", reason);
  REQUIRE(t);
  CHECK(t->path == "/");
  // grpc: empty serviceName is the default, mode=gun is Tun.
  t = parse_text("security=tls&type=grpc&serviceName=&mode=gun", reason);
  REQUIRE(t);
  CHECK(t->service_name == "vlessbench");
  CHECK_FALSE(t->grpc_multi);
  CHECK(describe(*t) == "grpc service=vlessbench");
  t->grpc_multi = true;
  t->tls = false;
  CHECK(describe(*t) == "grpc service=vlessbench multi plain");
}

TEST_CASE("transport spec: parse refuses with the reason the runner prints", "[transport][share_link]") {
  CHECK(refusal("type=quic&security=tls") ==
        "type=quic is not supported: the transports are tcp, ws, httpupgrade, grpc and xhttp");
  CHECK(refusal("security=tls&headerType=http") == "headerType=http is not supported: no HTTP obfuscation over TCP");
  CHECK_THAT(refusal("type=tcp"),
             Catch::StartsWith("security=none is not supported: the built-in client speaks VLESS over TLS only"));
  CHECK_THAT(refusal("type=ws&security=reality"), Catch::StartsWith("security=reality is not supported"));
  CHECK(refusal("security=tls&type=ws&path=ws") == "path=ws does not start with '/'");
  CHECK(refusal("security=tls&type=ws&path=%2Fws%3Fed%3D1&ed=2") == "ed= and the path's ?ed= disagree");
  CHECK(refusal("security=tls&type=httpupgrade&ed=1") == "ed= is for type=ws only");
  CHECK(refusal("security=tls&type=ws&ed=100001") == "ed=100001 is not a byte count (0..100000)");
  CHECK(refusal("security=tls&type=ws&ed=99999999999") == "ed=99999999999 is not a byte count (0..100000)");
  CHECK(refusal("security=tls&type=ws&ed=-1") == "ed=-1 is not a byte count (0..100000)");
  CHECK(refusal("security=tls&type=grpc&serviceName=a%2Fb") ==
        "serviceName=a/b is not a gRPC service name (no '/', '?', spaces)");
  CHECK(refusal("security=tls&type=grpc&serviceName=a%20b").rfind("serviceName=a b", 0) == 0);
  CHECK(refusal("security=tls&type=grpc&ed=1") == "ed= is for type=ws only");
  CHECK(refusal("security=tls&type=grpc&mode=stream") == "mode=stream is not a gRPC mode (gun or multi)");
  CHECK(refusal("security=tls&type=ws&type=grpc") == "repeated query key: type");
  CHECK(refusal("security=tls&path=%zz") == "bad percent-encoding in the value of path");
}
