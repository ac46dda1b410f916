// The [[vless]] transport keys (core/wire/transport_config.hpp), read through parse_config.
#include <catch2/catch.hpp>

#include <string>

#include "core/config/config.hpp"

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
  CHECK(c.vless[0].transport == transport_config{});
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
  transport_config out;
  auto first_error = [&](const transport_keys& keys) {
    const auto errors = validate_transport(keys, out);
    return errors.empty() ? std::string("(none)") : errors.front().first + ": " + errors.front().second;
  };
  CHECK(first_error({.transport = "tls", .tls = false}) ==
        "tls: only for transport = \"ws\", \"httpupgrade\" or \"grpc\"");
  CHECK(first_error({.transport = "grpc", .path = "/x"}) == "path: only for transport = \"ws\" or \"httpupgrade\"");
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
  transport_config out;
  CHECK(validate_transport({.transport = "grpc"}, out).empty());
  CHECK(out.kind == transport_kind::grpc);
  CHECK(out.tls);
  CHECK(out.service_name == "vlessbench");
  CHECK(to_string(out.kind) == "grpc");
  CHECK(validate_transport({.transport = "grpc", .tls = false, .service_name = "example.Gun_1"}, out).empty());
  CHECK_FALSE(out.tls);
  CHECK(out.service_name == "example.Gun_1");
}
