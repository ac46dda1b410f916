// core/wire/client_entries: the entries links prints and `vlessbench clients` runs, from one link.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "core/wire/client_entries.hpp"
#include "core/wire/share_link.hpp"

using namespace vlessbench;

namespace {
share_link link_of(const std::string& text) {
  std::string reason;
  auto l = parse_share_link(text, reason);
  INFO(reason);
  REQUIRE(l);
  return *l;
}
constexpr const char* uuid = "1b3f1c8e-2f5a-4c3e-9a1d-0e2b4c6d8f10";
}  // namespace

TEST_CASE("client entries: raw TLS leaves UDP on in every family", "[client_entries]") {
  const auto l = link_of(std::string("vless://") + uuid +
                         "@10.0.0.2:8443?encryption=none&security=tls&sni=localhost"
                         "&allowInsecure=1&type=tcp#tls-me");
  const std::string m = mihomo_proxy(l);
  CHECK(m.find("  - name: \"tls-me\"\n") == 0);
  CHECK(m.find("    udp: true\n") != std::string::npos);
  CHECK(m.find("    network: tcp\n") != std::string::npos);
  CHECK(m.find("    skip-cert-verify: true\n") != std::string::npos);
  CHECK(m.find("fingerprint") == std::string::npos);
  const auto sing = nlohmann::json::parse(singbox_outbound(l));
  // "network": "tcp" would make sing-box refuse UDP through the outbound.
  CHECK_FALSE(sing.contains("network"));
  CHECK(sing["server_port"] == 8443);
  CHECK(sing["tls"]["insecure"] == true);
  const auto v2 = nlohmann::json::parse(v2ray_outbound(l));
  CHECK(v2["streamSettings"]["network"] == "tcp");
  CHECK(v2["settings"]["vnext"][0]["users"][0]["id"] == uuid);
}

TEST_CASE("client entries: ws early data, httpupgrade and grpc keep their options", "[client_entries]") {
  client_entry_options opts;
  opts.fingerprint_note = "none yet";
  const auto ws = link_of(std::string("vless://") + uuid + "@h:1?security=tls&sni=s&type=ws&path=%2Fws&ed=2048#w");
  const std::string m = mihomo_proxy(ws, opts);
  CHECK(m.find("      max-early-data: 2048\n") != std::string::npos);
  CHECK(m.find("    # fingerprint: none yet\n") != std::string::npos);
  CHECK(nlohmann::json::parse(v2ray_outbound(ws))["streamSettings"]["wsSettings"]["path"] == "/ws?ed=2048");
  CHECK(nlohmann::json::parse(singbox_outbound(ws))["transport"]["max_early_data"] == 2048);

  const auto up = link_of(std::string("vless://") + uuid + "@h:1?security=none&type=httpupgrade&path=%2Fup#u");
  CHECK(mihomo_proxy(up).find("      v2ray-http-upgrade: true\n") != std::string::npos);
  CHECK(mihomo_proxy(up).find("    tls: false\n") != std::string::npos);
  CHECK(nlohmann::json::parse(singbox_outbound(up))["transport"]["type"] == "httpupgrade");
  CHECK(nlohmann::json::parse(v2ray_outbound(up))["streamSettings"]["security"] == "none");

  const auto g =
      link_of(std::string("vless://") + uuid + "@h:1?security=tls&sni=s&type=grpc&serviceName=vb&mode=multi#g");
  CHECK(mihomo_proxy(g).find("      grpc-service-name: \"vb\"\n") != std::string::npos);
  const auto v2 = nlohmann::json::parse(v2ray_outbound(g));
  CHECK(v2["streamSettings"]["grpcSettings"]["serviceName"] == "vb");
  CHECK(v2["streamSettings"]["grpcSettings"]["multiMode"] == true);
}

TEST_CASE("client entries: ws early data rides in the header the transport names", "[client_entries]") {
  auto ws = link_of(std::string("vless://") + uuid + "@h:1?security=tls&sni=s&type=ws&path=%2Fws&ed=512#w");
  CHECK(mihomo_proxy(ws).find("      early-data-header-name: \"Sec-WebSocket-Protocol\"\n") != std::string::npos);
  CHECK(nlohmann::json::parse(singbox_outbound(ws))["transport"]["early_data_header_name"] == "Sec-WebSocket-Protocol");
  ws.transport.early_data_header = "X-Early";  // a daemon's early_data_header (server/links.cpp)
  CHECK(mihomo_proxy(ws).find("      early-data-header-name: \"X-Early\"\n") != std::string::npos);
  CHECK(nlohmann::json::parse(singbox_outbound(ws))["transport"]["early_data_header_name"] == "X-Early");
  const auto v2 = nlohmann::json::parse(v2ray_outbound(ws))["streamSettings"]["wsSettings"];
  CHECK(v2["earlyDataHeaderName"] == "X-Early");
  CHECK(v2["maxEarlyData"] == 512);
  // The share link itself does not carry it.
  CHECK(format_share_link(ws).find("X-Early") == std::string::npos);
}
