#include <catch2/catch.hpp>

#include "runner/path_spec.hpp"

using namespace vlessbench::runner;

namespace {
constexpr const char* uuid_text = "b831381d-6324-4d53-ad4f-8cda48b30811";

std::string refusal(const std::string& arg) {
  std::string reason;
  const auto p = parse_path_arg(arg, reason);
  REQUIRE_FALSE(p.has_value());
  return reason;
}
}  // namespace

TEST_CASE("path SPEC: direct, CONNECT and SOCKS5 entries", "[runner]") {
  std::string reason;
  auto d = parse_path_arg("base=direct", reason);
  REQUIRE(d);
  CHECK(d->name == "base");
  CHECK(d->kind == path_kind::direct);

  auto h = parse_path_arg("clash=http://127.0.0.1:7890", reason);
  REQUIRE(h);
  CHECK(h->kind == path_kind::http_connect);
  CHECK(h->host == "127.0.0.1");
  CHECK(h->port == 7890);
  CHECK(h->spec == "http://127.0.0.1:7890");

  auto s = parse_path_arg("mixed=socks5://[::1]:7891/", reason);
  REQUIRE(s);
  CHECK(s->kind == path_kind::socks5);
  CHECK(s->host == "::1");
  CHECK(s->port == 7891);

  auto n = parse_path_arg("sr=HTTP://localhost:1082", reason);
  REQUIRE(n);
  CHECK(n->kind == path_kind::http_connect);
  CHECK(n->host == "localhost");

  auto f = parse_path_arg("tunnel=tcp://127.0.0.1:7000/", reason);
  REQUIRE(f);
  CHECK(f->kind == path_kind::forward);
  CHECK(f->host == "127.0.0.1");
  CHECK(f->port == 7000);
  CHECK(to_string(f->kind) == "forward");

  // tls:// is a bare TLS terminator in front of the target (HAProxy): TLS, then HTTP as if direct.
  auto tl = parse_path_arg("floor=TLS://127.0.0.1:8443/", reason);
  REQUIRE(tl);
  CHECK(tl->kind == path_kind::tls);
  CHECK(tl->host == "127.0.0.1");
  CHECK(tl->port == 8443);
  CHECK(to_string(tl->kind) == "tls");
  CHECK_FALSE(tl->link);
  auto tn = parse_path_arg("named=tls://terminator.example:443", reason);
  REQUIRE(tn);
  CHECK(tn->host == "terminator.example");
  CHECK(tn->port == 443);

  // tun dials the target itself; tun://H:P another address the client's TUN captures.
  auto t = parse_path_arg("phone=tun", reason);
  REQUIRE(t);
  CHECK(t->kind == path_kind::tun);
  CHECK(t->host.empty());
  CHECK(to_string(t->kind) == "tun");
  auto th = parse_path_arg("phone2=TUN://10.0.0.2:8080", reason);
  REQUIRE(th);
  CHECK(th->kind == path_kind::tun);
  CHECK(th->host == "10.0.0.2");
  CHECK(th->port == 8080);
}

TEST_CASE("path SPEC: malformed arguments are refused with a reason", "[runner]") {
  CHECK_THAT(refusal("direct"), Catch::Contains("NAME=SPEC"));
  CHECK_THAT(refusal("=direct"), Catch::Contains("path name"));
  CHECK_THAT(refusal("a b=direct"), Catch::Contains("path name"));
  CHECK_THAT(refusal("x=ftp://1.2.3.4:21"), Catch::Contains("SPEC must be"));
  CHECK_THAT(refusal("x=http://1.2.3.4"), Catch::Contains("HOST:PORT"));
  CHECK_THAT(refusal("x=http://1.2.3.4:0"), Catch::Contains("'1.2.3.4:0': port out of range"));
  CHECK_THAT(refusal("x=http://1.2.3.4:70000"), Catch::Contains("port out of range"));
  CHECK_THAT(refusal("x=http://1.2.3.4:8x"), Catch::Contains("port must be a number"));
  CHECK_THAT(refusal("x=http://u:p@1.2.3.4:1"), Catch::Contains("authentication"));
  CHECK_THAT(refusal("x=socks5://h:1/path"), Catch::Contains("only scheme://HOST:PORT"));
  CHECK_THAT(refusal("x=socks5://[::1:1080"), Catch::Contains("missing ']' after the IPv6 address"));
  CHECK_THAT(refusal("x=tcp://h:1/path"), Catch::Contains("only scheme://HOST:PORT"));
  CHECK_THAT(refusal("x=tcp://1.2.3.4"), Catch::Contains("HOST:PORT"));
  CHECK_THAT(refusal("x=tun://1.2.3.4"), Catch::Contains("HOST:PORT"));
  CHECK_THAT(refusal("x=tls://1.2.3.4"), Catch::Contains("HOST:PORT"));
  CHECK_THAT(refusal("x=tls://h:1/path"), Catch::Contains("only scheme://HOST:PORT"));
  CHECK_THAT(refusal("x=tls://u@h:1"), Catch::Contains("authentication"));
  CHECK_THAT(refusal("x=tls://[::1]:0"), Catch::Contains("port out of range"));
  CHECK_THAT(refusal("x=tls:/1.2.3.4:1"), Catch::Contains("tls://H:P"));
  CHECK_THAT(refusal("x=tun:"), Catch::Contains("SPEC must be"));
  // Links the daemon prints that the built-in client cannot dial: refused with what to use instead.
  const std::string uuid = "b831381d-6324-4d53-ad4f-8cda48b30811";
  CHECK_THAT(
      refusal("x=vless://" + uuid +
              "@h:443?security=reality&sni=a.example&pbk=w-pHnSOA-5YebSgBZ49a9v0AVNwww4_AIq7hYf9B3Ek&sid=&fp=chrome"),
      Catch::Contains("does not speak REALITY"));
  CHECK_THAT(refusal("x=vless://" + uuid + "@h:443?security=tls&type=tcp&postinterval=5"),
             Catch::Contains("postinterval is for type=xhttp"));
  CHECK_THAT(refusal("x=vless://" + uuid + "@h:443?security=tls&type=xhttp&postinterval=soon"),
             Catch::Contains("postinterval must be milliseconds"));
}

TEST_CASE("path SPEC: XHTTP links go to the built-in client", "[runner]") {
  std::string reason;
  const std::string base = std::string("x=vless://") + uuid_text + "@127.0.0.1:8443?security=";
  const auto tls = parse_path_arg(base + "tls&type=xhttp&path=%2Fxh&mode=stream-one&alpn=h2&postinterval=0", reason);
  REQUIRE(tls);
  CHECK(tls->link->transport.kind == vlessbench::transport_kind::xhttp);
  CHECK(tls->link->transport.xhttp_mode == vlessbench::xhttp::mode::stream_one);
  CHECK(tls->link->transport.path == "/xh");
  CHECK(tls->xhttp_post_interval_ms == 0u);
  const auto plain = parse_path_arg(base + "none&type=xhttp&mode=packet-up", reason);
  REQUIRE(plain);
  CHECK_FALSE(plain->link->transport.tls);
  CHECK_FALSE(plain->xhttp_post_interval_ms);
}

TEST_CASE("path SPEC: vless link with the runner's client parameters", "[runner]") {
  std::string reason;
  const std::string link = std::string("vless://") + uuid_text +
                           "@127.0.0.1:8443?encryption=none&security=tls&nodelay=off&sni=localhost&"
                           "allowInsecure=1&writes=split&type=tcp#quick%20ack";
  auto p = parse_path_arg("nagle=" + link, reason);
  INFO(reason);
  REQUIRE(p);
  CHECK(p->kind == path_kind::vless);
  CHECK(p->host == "127.0.0.1");
  CHECK(p->port == 8443);
  REQUIRE(p->link);
  CHECK(p->link->allow_insecure);
  CHECK(p->link->sni == "localhost");
  CHECK(p->link->name == "quick ack");
  REQUIRE(p->nodelay);
  CHECK_FALSE(*p->nodelay);
  REQUIRE(p->writes);
  CHECK(*p->writes == write_mode::split);
  // Per-path parameters override the command-line defaults; absent ones keep them.
  const auto o = p->client_options({true, write_mode::one});
  CHECK_FALSE(o.nodelay);
  CHECK(o.writes == write_mode::split);

  auto plain = parse_path_arg(std::string("v=vless://") + uuid_text + "@h:1?security=tls", reason);
  REQUIRE(plain);
  CHECK_FALSE(plain->nodelay.has_value());
  const auto d = plain->client_options({false, write_mode::split});
  CHECK_FALSE(d.nodelay);
  CHECK(d.writes == write_mode::split);

  CHECK_THAT(refusal(std::string("v=vless://") + uuid_text + "@h:1?security=tls&writes=three"),
             Catch::Contains("writes must be"));
  CHECK_THAT(refusal(std::string("v=vless://") + uuid_text + "@h:1?security=tls&nodelay=maybe"),
             Catch::Contains("nodelay must be"));
  CHECK_THAT(refusal("v=vless://not-a-uuid@h:1?security=tls"), Catch::Contains("bad vless link"));
}

TEST_CASE("path SPEC: mux=on, muxnew and packetEncoding on a vless link", "[runner]") {
  std::string reason;
  const std::string base = std::string("v=vless://") + uuid_text + "@h:1?security=tls";
  auto plain = parse_path_arg(base, reason);
  REQUIRE(plain);
  CHECK_FALSE(plain->mux);
  CHECK_FALSE(plain->xudp);
  for (const char* on : {"on", "1", "true"}) {
    auto p = parse_path_arg(base + "&mux=" + on, reason);
    REQUIRE(p);
    CHECK(p->mux);
    CHECK(p->mux_new == mux_new_mode::sub);
  }
  auto fresh = parse_path_arg(base + "&mux=on&muxnew=connection&packetEncoding=xudp#n", reason);
  INFO(reason);
  REQUIRE(fresh);
  CHECK(fresh->mux);
  CHECK(fresh->mux_new == mux_new_mode::connection);
  CHECK(fresh->xudp);
  REQUIRE(fresh->link);
  CHECK(fresh->link->name == "n");
  CHECK(to_string(fresh->mux_new) == "connection");
  auto off = parse_path_arg(base + "&mux=off&packetEncoding=none", reason);
  REQUIRE(off);
  CHECK_FALSE(off->mux);
  CHECK_FALSE(off->xudp);
  CHECK_THAT(refusal(base + "&mux=sometimes"), Catch::Contains("mux must be on or off"));
  CHECK_THAT(refusal(base + "&muxnew=first"), Catch::Contains("muxnew must be sub or connection"));
  CHECK_THAT(refusal(base + "&packetEncoding=packet"), Catch::Contains("packetEncoding must be xudp or none"));
}

TEST_CASE("target URL parsing", "[runner]") {
  std::string reason;
  auto a = parse_target_url("http://127.0.0.1:8080/", reason);
  REQUIRE(a);
  CHECK(a->host == "127.0.0.1");
  CHECK(a->port == 8080);
  CHECK(a->path == "/");
  CHECK(a->authority() == "127.0.0.1:8080");

  auto b = parse_target_url("http://localhost/bytes/10", reason);
  REQUIRE(b);
  CHECK(b->port == 80);
  CHECK(b->path == "/bytes/10");

  auto c = parse_target_url("http://[::1]:8080", reason);
  REQUIRE(c);
  CHECK(c->host == "::1");
  CHECK(c->path == "/");
  CHECK(c->authority() == "[::1]:8080");

  CHECK(a->scheme == target_scheme::http);
  auto s = parse_target_url("https://127.0.0.1/generate_204", reason);
  REQUIRE(s);
  CHECK(s->scheme == target_scheme::https);
  CHECK(s->port == 443);
  CHECK(s->path == "/generate_204");
  auto banner = parse_target_url("banner://127.0.0.1:8082", reason);
  REQUIRE(banner);
  CHECK(banner->scheme == target_scheme::banner);
  CHECK(banner->port == 8082);
  CHECK(parse_target_url("banner://127.0.0.1:8082/", reason));
  CHECK_FALSE(parse_target_url("banner://127.0.0.1/", reason));
  CHECK_THAT(reason, Catch::Contains("needs a port"));
  CHECK_FALSE(parse_target_url("banner://127.0.0.1:8082/x", reason));
  CHECK_FALSE(parse_target_url("ftp://127.0.0.1/", reason));
  CHECK_FALSE(parse_target_url("http://:80/", reason));
  CHECK_FALSE(parse_target_url("http://h:99999/", reason));
}

TEST_CASE("bulk runs: each path becomes NAME/down and NAME/up, downloads first", "[runner]") {
  std::string reason;
  std::vector<path_spec> paths{*parse_path_arg("direct=direct", reason),
                               *parse_path_arg("p=http://127.0.0.1:1", reason)};
  const auto bulk = bulk_paths(paths);
  REQUIRE(bulk.size() == 4);
  CHECK(bulk[0].name == "direct/down");
  CHECK(bulk[0].bulk == bulk_direction::down);
  CHECK(bulk[1].name == "p/down");
  CHECK(bulk[1].kind == path_kind::http_connect);
  CHECK(bulk[2].name == "direct/up");
  CHECK(bulk[3].name == "p/up");
  CHECK(bulk[3].bulk == bulk_direction::up);
}

TEST_CASE("the direct baseline is always present and names are unique", "[runner]") {
  std::string reason;
  std::vector<path_spec> paths{*parse_path_arg("a=http://127.0.0.1:1", reason),
                               *parse_path_arg("b=socks5://127.0.0.1:2", reason)};
  auto base = finalize_paths(paths, reason);
  REQUIRE(base);
  CHECK(*base == 0);
  REQUIRE(paths.size() == 3);
  CHECK(paths[0].name == "direct");
  CHECK(paths[0].kind == path_kind::direct);

  std::vector<path_spec> given{*parse_path_arg("a=http://127.0.0.1:1", reason), *parse_path_arg("lan=direct", reason)};
  base = finalize_paths(given, reason);
  REQUIRE(base);
  CHECK(*base == 1);
  CHECK(given.size() == 2);

  std::vector<path_spec> dup{*parse_path_arg("a=direct", reason), *parse_path_arg("a=http://h:1", reason)};
  CHECK_FALSE(finalize_paths(dup, reason));
  CHECK_THAT(reason, Catch::Contains("used twice"));

  std::vector<path_spec> squat{*parse_path_arg("direct=http://h:1", reason)};
  CHECK_FALSE(finalize_paths(squat, reason));
}

TEST_CASE("nagle-paths option turns named vless paths Nagle-prone", "[runner]") {
  std::string reason;
  std::vector<path_spec> paths{*parse_path_arg(std::string("a=vless://") + uuid_text + "@h:1?security=tls", reason),
                               *parse_path_arg(std::string("b=vless://") + uuid_text + "@h:2?security=tls", reason),
                               *parse_path_arg("c=http://h:3", reason)};
  REQUIRE(apply_nagle_paths(paths, {"b"}, reason));
  CHECK_FALSE(paths[0].nodelay.has_value());
  REQUIRE(paths[1].nodelay);
  CHECK_FALSE(*paths[1].nodelay);
  CHECK(*paths[1].writes == write_mode::split);
  CHECK_FALSE(apply_nagle_paths(paths, {"c"}, reason));
  CHECK_THAT(reason, Catch::Contains("'c'"));
  CHECK_FALSE(apply_nagle_paths(paths, {"zz"}, reason));
}

TEST_CASE("udp:// and dns:// targets", "[runner]") {
  std::string reason;
  auto u = parse_target_url("udp://127.0.0.1:8054", reason);
  REQUIRE(u);
  CHECK(u->scheme == target_scheme::udp);
  CHECK(is_datagram(u->scheme));
  CHECK(u->host == "127.0.0.1");
  CHECK(u->port == 8054);
  auto six = parse_target_url("udp://[::1]:9/", reason);
  REQUIRE(six);
  CHECK(six->host == "::1");
  auto d = parse_target_url("DNS://127.0.0.1/Host.VlessBench.test.", reason);
  REQUIRE(d);
  CHECK(d->scheme == target_scheme::dns);
  CHECK(d->port == 53);
  CHECK(d->dns_name == "host.vlessbench.test");
  auto d2 = parse_target_url("dns://127.0.0.1:8053/a.delay-20.vlessbench.test", reason);
  REQUIRE(d2);
  CHECK(d2->port == 8053);
  CHECK(d2->dns_name == "a.delay-20.vlessbench.test");
  CHECK_FALSE(is_datagram(target_scheme::banner));

  for (const char* bad : {"udp://127.0.0.1", "udp://127.0.0.1:9/x", "dns://127.0.0.1:53", "dns://127.0.0.1:53/",
                          "dns://127.0.0.1/a..b", "dns://127.0.0.1/a b", "dns://127.0.0.1/.x"}) {
    INFO(bad);
    CHECK_FALSE(parse_target_url(bad, reason));
  }
  CHECK_FALSE(parse_target_url("dns://h/" + std::string(64, 'a') + ".test", reason));
  CHECK(reason.find("labels of 1-63") != std::string::npos);
  CHECK_FALSE(parse_target_url("udp://127.0.0.1", reason));
  CHECK(reason == "a udp:// target needs a port (udp://HOST:PORT)");
}

TEST_CASE("ntp:// and stun:// targets: default ports 123 and 3478 and no path", "[runner]") {
  std::string reason;
  const auto n = parse_target_url("ntp://127.0.0.1", reason);
  REQUIRE(n);
  CHECK(n->scheme == target_scheme::ntp);
  CHECK(n->port == 123);
  CHECK(is_datagram(n->scheme));
  const auto s = parse_target_url("stun://127.0.0.1:8478", reason);
  REQUIRE(s);
  CHECK(s->scheme == target_scheme::stun);
  CHECK(s->port == 8478);
  CHECK(to_string(s->scheme) == "stun");
  CHECK(parse_target_url("stun://127.0.0.1", reason)->port == 3478);
  CHECK_FALSE(parse_target_url("ntp://127.0.0.1:123/x", reason));
  CHECK(reason == "a ntp:// target has no path");
  CHECK_FALSE(parse_target_url("quic://127.0.0.1:1", reason));
  CHECK(reason.find("ntp or stun URL") != std::string::npos);
}

TEST_CASE("only direct, socks5 and vless paths carry udp:// and dns:// targets", "[runner]") {
  std::string reason;
  const auto udp = *parse_target_url("udp://127.0.0.1:9", reason);
  const auto http = *parse_target_url("http://127.0.0.1:8080/", reason);
  std::vector<path_spec> ok;
  for (const char* arg : {"direct=direct", "s=socks5://127.0.0.1:1080"}) ok.push_back(*parse_path_arg(arg, reason));
  ok.push_back(*parse_path_arg(std::string("v=vless://") + uuid_text + "@127.0.0.1:8443?security=tls", reason));
  CHECK(check_paths_for_target(ok, udp, reason));
  for (const char* arg :
       {"h=http://127.0.0.1:1", "f=tcp://127.0.0.1:1", "t=tun", "t2=tun://127.0.0.1:1", "tl=tls://127.0.0.1:1"}) {
    INFO(arg);
    auto paths = ok;
    paths.push_back(*parse_path_arg(arg, reason));
    CHECK_FALSE(check_paths_for_target(paths, udp, reason));
    CHECK(reason.find("cannot carry a udp:// target") != std::string::npos);
    CHECK(check_paths_for_target(paths, http, reason));  // TCP targets: any kind
  }
}

TEST_CASE("path SPEC: Mux and XUDP links carry udp:// and dns:// targets", "[runner]") {
  const std::string base = std::string("m=vless://") + uuid_text + "@127.0.0.1:8443?security=tls";
  std::string reason;
  const auto udp = parse_target_url("udp://127.0.0.1:7", reason);
  const auto dns = parse_target_url("dns://127.0.0.1:53/host.example", reason);
  const auto http = parse_target_url("http://127.0.0.1:80/", reason);
  REQUIRE(udp);
  REQUIRE(dns);
  REQUIRE(http);
  for (const char* extra : {"&mux=on", "&packetEncoding=xudp", "&mux=on&packetEncoding=xudp",
                            "&mux=on&muxnew=connection", "&mux=off&packetEncoding=none&fp=chrome"}) {
    INFO(extra);
    const auto p = parse_path_arg(base + extra, reason);
    REQUIRE(p);
    CHECK(check_paths_for_target({*p}, *http, reason));
    CHECK(check_paths_for_target({*p}, *udp, reason));
    CHECK(check_paths_for_target({*p}, *dns, reason));
  }
}
