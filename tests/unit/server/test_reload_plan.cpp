// plan_reload (server/reload_plan): what a SIGHUP keeps, opens, closes and logs, decided from two
// configs alone. The integration tests (test_lifecycle, test_signals, test_reload_sessions) drive
// the same through a running daemon.
#include <algorithm>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/config/config.hpp"
#include "server/reload_plan.hpp"

using namespace vlessbench;

namespace {

const char* const user =
    "[[users]]\nname = \"u\"\nuuid = "
    "\"0bc2f2bd-f35f-4c1e-8b9b-befe527996d0\"\n";

config parse(const std::string& text) { return parse_config(std::string(user) + text, "x.toml"); }

const char* const base = R"(
[[vless]]
name = "a"
listen = "127.0.0.1:8443"

[[vless]]
name = "b"
listen = "127.0.0.1:8444"
tcp = { quickack = "on" }

[[target]]
name = "http"
listen = "127.0.0.1:8080"
)";

asio::ip::tcp::endpoint ep(const char* addr, unsigned short port) { return {asio::ip::make_address(addr), port}; }

}  // namespace

TEST_CASE("listeners_of lists vless then target, in file order", "[reload_plan]") {
  const auto ls = listeners_of(parse(base));
  REQUIRE(ls.size() == 3);
  CHECK(ls[0] == planned_listener{listener_kind::vless, "a", ep("127.0.0.1", 8443), {}, {}});
  CHECK(ls[1].name == "b");
  CHECK(ls[1].tcp.quickack == quickack_mode::on);
  CHECK(ls[1].upstream_tcp.quickack == quickack_mode::kernel);
  CHECK(ls[2].kind == listener_kind::target);
  CHECK(ls[2].upstream_tcp == ls[2].tcp);
  CHECK(policy_text(ls[1].tcp) == "nodelay=true quickack=on");
}

TEST_CASE("the same config: every listener kept, nothing to log", "[reload_plan]") {
  const config c = parse(base);
  const reload_plan p = plan_reload(c, c);
  CHECK_FALSE(p.refused);
  CHECK(p.keep.size() == 3);
  for (const auto& k : p.keep) CHECK(k.from == k.to);
  CHECK(p.open.empty());
  CHECK(p.close.empty());
  CHECK(p.take_over.empty());
  CHECK_FALSE(p.tls_changed);
  CHECK_FALSE(p.log_level_changed);
  CHECK_FALSE(p.log_queue_changed);
  CHECK_FALSE(p.reopen_access_log);  // stdout stays stdout
  CHECK(p.changes.empty());
}

TEST_CASE("an added listener is opened", "[reload_plan]") {
  const reload_plan p =
      plan_reload(parse(base), parse(std::string(base) + "[[target]]\nname = \"t2\"\nlisten = \"127.0.0.1:8081\"\n"));
  CHECK(p.keep.size() == 3);
  REQUIRE(p.open.size() == 1);
  CHECK(p.open[0] == planned_listener{listener_kind::target, "t2", ep("127.0.0.1", 8081), {}, {}});
  CHECK(p.close.empty());
  CHECK(p.changes == std::vector<std::string>{"opened target \"t2\" on 127.0.0.1:8081 "
                                              "(nodelay=true quickack=kernel)"});
}

TEST_CASE("a removed listener is closed", "[reload_plan]") {
  const reload_plan p = plan_reload(parse(base), parse(R"(
[[vless]]
name = "a"
listen = "127.0.0.1:8443"
[[target]]
name = "http"
listen = "127.0.0.1:8080"
)"));
  CHECK(p.keep.size() == 2);
  REQUIRE(p.close.size() == 1);
  CHECK(p.close[0].name == "b");
  CHECK(p.open.empty());
  CHECK(p.changes == std::vector<std::string>{"closed vless \"b\" on 127.0.0.1:8444"});
}

TEST_CASE("a kept listener with a new policy or name is updated in place", "[reload_plan]") {
  const reload_plan p = plan_reload(parse(base), parse(R"(
[[vless]]
name = "a"
listen = "127.0.0.1:8443"
tcp = { nodelay = false }
upstream_tcp = { quickack = "off" }

[[vless]]
name = "b2"
listen = "127.0.0.1:8444"
tcp = { quickack = "on" }

[[target]]
name = "http"
listen = "127.0.0.1:8080"
tcp = { quickack = "on" }
)"));
  REQUIRE(p.keep.size() == 3);
  CHECK(p.keep[0].to.tcp.nodelay == false);
  CHECK(p.keep[0].to.upstream_tcp.quickack == quickack_mode::off);
  CHECK(p.open.empty());
  CHECK(p.close.empty());
  CHECK(p.changes == std::vector<std::string>{
                         "vless \"a\" on 127.0.0.1:8443: nodelay=true "
                         "quickack=kernel -> nodelay=false quickack=kernel "
                         "(upstream nodelay=true quickack=off)",
                         // A new name alone is a change too: the log line says the policy stayed.
                         "vless \"b2\" on 127.0.0.1:8444: nodelay=true "
                         "quickack=on -> nodelay=true quickack=on "
                         "(upstream nodelay=true quickack=kernel)",
                         "target \"http\" on 127.0.0.1:8080: nodelay=true "
                         "quickack=kernel -> nodelay=true quickack=on",
                     });
}

TEST_CASE("a kept listener whose transport alone changes is listed with both transports", "[reload_plan]") {
  const reload_plan p = plan_reload(parse(base), parse(R"(
[[vless]]
name = "a"
listen = "127.0.0.1:8443"
transport = "ws"
path = "/ws"
max_early_data = 2048

[[vless]]
name = "b"
listen = "127.0.0.1:8444"
tcp = { quickack = "on" }

[[target]]
name = "http"
listen = "127.0.0.1:8080"
)"));
  REQUIRE(p.keep.size() == 3);
  CHECK(p.keep[0].to.transport.kind == transport_kind::ws);
  CHECK(p.open.empty());
  CHECK(p.close.empty());
  CHECK(p.changes == std::vector<std::string>{
                         "vless \"a\" on 127.0.0.1:8443: nodelay=true quickack=kernel -> nodelay=true "
                         "quickack=kernel (upstream nodelay=true quickack=kernel); transport tls -> ws path=/ws "
                         "early_data=2048",
                     });
}

TEST_CASE("describe names a transport with what is set", "[reload_plan]") {
  transport_spec t;
  CHECK(describe(t) == "tls");
  t.kind = transport_kind::httpupgrade;
  t.path = "/hu";
  t.host = "cdn.example";
  t.tls = false;
  CHECK(describe(t) == "httpupgrade path=/hu host=cdn.example plain");
  t = {};
  t.kind = transport_kind::grpc;
  t.service_name = "svc";
  CHECK(describe(t) == "grpc service=svc");
  t = {};
  t.kind = transport_kind::ws;
  t.max_early_data = 2048;
  t.early_data_header = "Sec-WebSocket-Protocol";
  CHECK(describe(t) == "ws path=/ early_data=2048 early_data_header=Sec-WebSocket-Protocol");
}

TEST_CASE("a listener that changes its address is closed and opened", "[reload_plan]") {
  const reload_plan p = plan_reload(parse(base), parse(R"(
[[vless]]
name = "a"
listen = "127.0.0.1:9443"
[[vless]]
name = "b"
listen = "127.0.0.1:8444"
tcp = { quickack = "on" }
[[target]]
name = "http"
listen = "127.0.0.1:8080"
)"));
  CHECK(p.keep.size() == 2);
  REQUIRE(p.close.size() == 1);
  REQUIRE(p.open.size() == 1);
  CHECK(p.close[0].listen == ep("127.0.0.1", 8443));
  CHECK(p.open[0].listen == ep("127.0.0.1", 9443));
  CHECK(p.open[0].name == "a");
  // Closed before opened, as the daemon logs them.
  CHECK(p.changes == std::vector<std::string>{
                         "closed vless \"a\" on 127.0.0.1:8443",
                         "opened vless \"a\" on 127.0.0.1:9443 (nodelay=true quickack=kernel)",
                     });
}

TEST_CASE("an endpoint that moves to the other kind is taken over", "[reload_plan]") {
  // The VLESS listener and the target swap ports.
  const reload_plan p = plan_reload(parse(R"(
[[vless]]
name = "v"
listen = "127.0.0.1:8443"
[[target]]
name = "t"
listen = "127.0.0.1:8080"
)"),
                                    parse(R"(
[[vless]]
name = "v"
listen = "127.0.0.1:8080"
[[target]]
name = "t"
listen = "127.0.0.1:8443"
)"));
  CHECK(p.keep.empty());
  CHECK(p.open.empty());
  CHECK(p.close.empty());
  REQUIRE(p.take_over.size() == 2);
  CHECK(p.take_over[0].from.kind == listener_kind::target);
  CHECK(p.take_over[0].to.kind == listener_kind::vless);
  CHECK(p.changes == std::vector<std::string>{
                         "target \"t\" on 127.0.0.1:8080 is now vless \"v\" "
                         "(nodelay=true quickack=kernel)",
                         "vless \"v\" on 127.0.0.1:8443 is now target \"t\" "
                         "(nodelay=true quickack=kernel)",
                     });
}

TEST_CASE("a TLS change rebuilds the context and lists no listener change", "[reload_plan]") {
  const config c = parse(base);
  CHECK(plan_reload(c, parse(std::string("[tls]\ncert = \"/c.pem\"\nkey = \"/k.pem\"\n") + base)).tls_changed);
  CHECK(plan_reload(c, parse(std::string("[tls]\nmin_version = \"1.3\"\n") + base)).tls_changed);
  CHECK(plan_reload(c, parse(std::string("[tls]\nnames = [\"example.org\"]\n") + base)).tls_changed);
  const reload_plan p = plan_reload(c, parse(std::string("[tls]\nsession_tickets = true\n") + base));
  CHECK(p.tls_changed);
  CHECK(p.keep.size() == 3);
  CHECK(p.changes.empty());
}

TEST_CASE("log and user changes are listed after the listeners", "[reload_plan]") {
  const config c = parse(base);
  const reload_plan p = plan_reload(c, parse(std::string("[log]\nlevel = \"debug\"\nqueue_bytes = "
                                                         "131072\n[[users]]\nname = \"w\"\n"
                                                         "uuid = \"1bc2f2bd-f35f-4c1e-8b9b-befe527996d0\"\n") +
                                             base + "[[target]]\nname = \"t2\"\nlisten = \"127.0.0.1:8081\"\n"));
  CHECK(p.log_level_changed);
  CHECK(p.log_queue_changed);
  CHECK(p.changes == std::vector<std::string>{
                         "opened target \"t2\" on 127.0.0.1:8081 (nodelay=true "
                         "quickack=kernel)",
                         "log queue 4194304 -> 131072 bytes",
                         "log level info -> debug",
                         "2 user(s)",
                     });
}

TEST_CASE(
    "an access log file is reopened at every reload, stdout only when it "
    "changes",
    "[reload_plan]") {
  const config out = parse(base);
  const config file = parse(std::string("[log]\naccess = \"/var/log/a.jsonl\"\n") + base);
  CHECK_FALSE(plan_reload(out, out).reopen_access_log);
  CHECK(plan_reload(out, file).reopen_access_log);
  CHECK(plan_reload(file, file).reopen_access_log);  // rotation: mv, then SIGHUP
  CHECK(plan_reload(file, out).reopen_access_log);
}

TEST_CASE("a new thread count is refused with nothing else planned", "[reload_plan]") {
  const reload_plan p = plan_reload(parse(base), parse(std::string("[limits]\nthreads = 2\n") + base +
                                                       "[[target]]\n"
                                                       "name = \"t2\"\nlisten = \"127.0.0.1:8081\"\n"));
  REQUIRE(p.refused);
  CHECK(*p.refused == "limits.threads 1 -> 2: the thread count changes at a restart only");
  CHECK(p.keep.empty());
  CHECK(p.open.empty());
  CHECK(p.changes.empty());
}

TEST_CASE("the admin listener moves when its endpoint changes and a token change is listed", "[reload_plan]") {
  const config c = parse(base);
  CHECK_FALSE(plan_reload(c, c).admin_rebind);
  const reload_plan moved = plan_reload(c, parse(std::string(base) + "[admin]\nlisten = \"127.0.0.1:9191\"\n"));
  CHECK(moved.admin_rebind);
  CHECK(moved.changes == std::vector<std::string>{"admin 127.0.0.1:9090 -> 127.0.0.1:9191"});
  const reload_plan off = plan_reload(c, parse(std::string(base) + "[admin]\nenabled = false\n"));
  CHECK(off.admin_rebind);
  CHECK(off.changes == std::vector<std::string>{"admin 127.0.0.1:9090 -> off"});
  const reload_plan token = plan_reload(c, parse(std::string(base) + "[admin]\ntoken = \"0123456789abcdef\"\n"));
  CHECK_FALSE(token.admin_rebind);
  CHECK(token.changes == std::vector<std::string>{"admin token changed"});
  const reload_plan limits = plan_reload(c, parse(std::string(base) + "[admin]\nmax_connections_per_client = 2\n"));
  CHECK_FALSE(limits.admin_rebind);  // the socket stays; new connections get the new caps
  CHECK(limits.changes == std::vector<std::string>{"admin limits changed (new connections)"});
}

TEST_CASE("[[udp_target]] and [[dns]] open, close and update in place by endpoint", "[reload_plan]") {
  const std::string udp = "[[udp_target]]\nname = \"u\"\nlisten = \"127.0.0.1:9053\"\n";
  const std::string dns = "[[dns]]\nname = \"d\"\nlisten = \"127.0.0.1:9054\"\n";
  const config both = parse(base + udp + dns);
  const reload_plan same = plan_reload(both, parse(base + udp + dns));
  CHECK(same.udp_targets.open.empty());
  CHECK(same.udp_targets.keep.empty());
  CHECK(same.dns.keep.empty());
  CHECK(same.changes.empty());

  const reload_plan added = plan_reload(parse(base), both);
  CHECK_FALSE(added.refused);
  REQUIRE(added.udp_targets.open.size() == 1);
  CHECK(added.udp_targets.open[0].name == "u");
  REQUIRE(added.dns.open.size() == 1);
  CHECK(added.open.empty());  // no TCP listener of the ordinary kinds: [[dns]]'s TCP half is its own
  CHECK(added.changes ==
        std::vector<std::string>{"opened udp_target \"u\" on 127.0.0.1:9053", "opened dns \"d\" on 127.0.0.1:9054"});

  const reload_plan removed = plan_reload(both, parse(base));
  CHECK(removed.udp_targets.close.size() == 1);
  CHECK(removed.dns.close.size() == 1);
  CHECK(removed.changes ==
        std::vector<std::string>{"closed udp_target \"u\" on 127.0.0.1:9053", "closed dns \"d\" on 127.0.0.1:9054"});

  // Same endpoints, another name and zone: updated in place, nothing bound or closed.
  const reload_plan updated =
      plan_reload(both, parse(std::string(base) + "[[udp_target]]\nname = \"echo\"\nlisten = \"127.0.0.1:9053\"\n" +
                              "[[dns]]\nname = \"d\"\nlisten = \"127.0.0.1:9054\"\nzone = \"example.test\"\n"));
  CHECK(updated.udp_targets.open.empty());
  CHECK(updated.udp_targets.close.empty());
  REQUIRE(updated.udp_targets.keep.size() == 1);
  CHECK(updated.udp_targets.keep[0].second.name == "echo");
  REQUIRE(updated.dns.keep.size() == 1);
  CHECK(updated.dns.keep[0].second.zone == "example.test");
  CHECK(updated.changes == std::vector<std::string>{"udp_target \"echo\" on 127.0.0.1:9053 updated",
                                                    "dns \"d\" on 127.0.0.1:9054 updated"});

  // Moved: the old endpoint closes, the new one opens.
  const reload_plan moved =
      plan_reload(both, parse(std::string(base) + "[[udp_target]]\nname = \"u\"\nlisten = \"127.0.0.1:9055\"\n" + dns));
  CHECK(moved.udp_targets.open.size() == 1);
  CHECK(moved.udp_targets.close.size() == 1);
}

TEST_CASE("a new listener on the port of one this reload closes is refused with both named", "[reload_plan]") {
  const std::string wild = "[[udp_target]]\nname = \"u\"\nlisten = \"0.0.0.0:9053\"\n";
  // 0.0.0.0:P is still bound while 127.0.0.1:P would be: Linux refuses that bind.
  const reload_plan moved =
      plan_reload(parse(std::string(base) + wild),
                  parse(std::string(base) + "[[udp_target]]\nname = \"u\"\nlisten = \"127.0.0.1:9053\"\n"));
  REQUIRE(moved.refused);
  CHECK(*moved.refused ==
        "udp_target \"u\" on 127.0.0.1:9053 needs the port of udp_target \"u\" on 0.0.0.0:9053, which this reload "
        "closes: close that one in a reload of its own first");
  CHECK(moved.udp_targets.open.empty());
  // [[dns]] takes UDP and TCP: the endpoint of a closing [[udp_target]] is in its way too.
  const reload_plan swapped = plan_reload(
      parse(std::string(base) + wild), parse(std::string(base) + "[[dns]]\nname = \"d\"\nlisten = \"0.0.0.0:9053\"\n"));
  REQUIRE(swapped.refused);
  CHECK(swapped.refused->find("dns \"d\" on 0.0.0.0:9053 needs the port of udp_target \"u\"") == 0);
  // Another address on another port, or a specific address beside another specific one: fine.
  CHECK_FALSE(plan_reload(parse(std::string(base) + wild),
                          parse(std::string(base) + "[[udp_target]]\nname = \"u\"\nlisten = \"0.0.0.0:9054\"\n"))
                  .refused);
  const std::string lo = "[[udp_target]]\nname = \"u\"\nlisten = \"127.0.0.1:9053\"\n";
  CHECK_FALSE(plan_reload(parse(std::string(base) + lo),
                          parse(std::string(base) + "[[udp_target]]\nname = \"u\"\nlisten = \"127.0.0.2:9053\"\n"))
                  .refused);
}

// The running config names the ports its "HOST:0" listeners were given (the daemon resolves it
// after binding); the next one says 0 again.
TEST_CASE("a reload keeps the port a port-0 listener was given: matched by name and address", "[reload_plan]") {
  const std::string running_text = R"(
[[vless]]
name = "a"
listen = "127.0.0.1:40001"

[[target]]
name = "http"
listen = "127.0.0.1:40002"

[[udp_target]]
name = "u"
listen = "127.0.0.1:40003"

[[dns]]
name = "d"
listen = "127.0.0.1:40004"

[admin]
listen = "127.0.0.1:40005"
)";
  const config running = parse(running_text);
  const config again = parse(R"(
[[vless]]
name = "a"
listen = "127.0.0.1:0"
tcp = { quickack = "on" }

[[target]]
name = "http"
listen = "127.0.0.1:0"

[[udp_target]]
name = "u"
listen = "127.0.0.1:0"

[[dns]]
name = "d"
listen = "127.0.0.1:0"
zone = "example.test"

[admin]
listen = "127.0.0.1:0"
)");
  const reload_plan p = plan_reload(running, again);
  CHECK_FALSE(p.refused);
  CHECK(p.open.empty());
  CHECK(p.close.empty());
  REQUIRE(p.keep.size() == 2);
  CHECK(p.keep[0].to.listen == ep("127.0.0.1", 40001));
  CHECK(p.keep[0].to.tcp.quickack == quickack_mode::on);
  CHECK(p.keep[1].to.listen == ep("127.0.0.1", 40002));
  CHECK(p.udp_targets.open.empty());
  CHECK(p.udp_targets.close.empty());
  CHECK(p.udp_targets.keep.empty());  // unchanged but for the 0: nothing to do
  REQUIRE(p.dns.keep.size() == 1);
  CHECK(p.dns.keep[0].second.listen == ep("127.0.0.1", 40004));
  CHECK(p.dns.keep[0].second.zone == "example.test");
  CHECK_FALSE(p.admin_rebind);
  CHECK(p.changes == std::vector<std::string>{
                         "vless \"a\" on 127.0.0.1:40001: nodelay=true quickack=kernel -> nodelay=true quickack=on "
                         "(upstream nodelay=true quickack=kernel)",
                         "dns \"d\" on 127.0.0.1:40004 updated"});

  // Another name or another address on port 0 is another listener: opened on a new port, the old
  // one closed.
  const reload_plan renamed = plan_reload(running, parse(R"(
[[vless]]
name = "b"
listen = "127.0.0.1:0"

[[target]]
name = "http"
listen = "127.0.0.2:0"
)"));
  CHECK_FALSE(renamed.refused);
  REQUIRE(renamed.open.size() == 2);
  CHECK(renamed.open[0].listen == ep("127.0.0.1", 0));
  CHECK(renamed.open[1].listen == ep("127.0.0.2", 0));
  CHECK(renamed.close.size() == 2);
  CHECK(renamed.keep.empty());
  CHECK(renamed.udp_targets.close.size() == 1);
  CHECK(renamed.admin_rebind);  // [admin] left out: the default endpoint
  CHECK(std::find(renamed.changes.begin(), renamed.changes.end(),
                  "opened vless \"b\" on 127.0.0.1:0 (nodelay=true quickack=kernel)") != renamed.changes.end());

  // The endpoint wins over the name: the bound port named outright is that listener; "a" on 0
  // then opens anew.
  const reload_plan named = plan_reload(running, parse(R"(
[[vless]]
name = "a"
listen = "127.0.0.1:0"

[[vless]]
name = "z"
listen = "127.0.0.1:40001"
)"));
  REQUIRE(named.keep.size() == 1);
  CHECK(named.keep[0].from.name == "a");
  CHECK(named.keep[0].to.name == "z");
  REQUIRE(named.open.size() == 1);
  CHECK(named.open[0].name == "a");
  CHECK(named.open[0].listen == ep("127.0.0.1", 0));

  // Same name on port 0, another kind: the socket is handed over, its port kept.
  const reload_plan kind = plan_reload(running, parse("[[target]]\nname = \"a\"\nlisten = \"127.0.0.1:0\"\n"));
  REQUIRE(kind.take_over.size() == 1);
  CHECK(kind.take_over[0].to.listen == ep("127.0.0.1", 40001));
  CHECK(kind.take_over[0].to.kind == listener_kind::target);

  // The admin listener on another address, port 0: rebound.
  CHECK(plan_reload(running,
                    parse("[[target]]\nname = \"http\"\nlisten = \"127.0.0.1:0\"\n[admin]\nlisten = \"127.0.0.2:0\"\n"))
            .admin_rebind);
}

TEST_CASE("a port-0 listener never waits for a socket this reload closes", "[reload_plan]") {
  const reload_plan p =
      plan_reload(parse(std::string(base) + "[[udp_target]]\nname = \"u\"\nlisten = \"0.0.0.0:9053\"\n"),
                  parse(std::string(base) + "[[dns]]\nname = \"d\"\nlisten = \"0.0.0.0:0\"\n"));
  CHECK_FALSE(p.refused);
  CHECK(p.dns.open.size() == 1);
  CHECK(p.udp_targets.close.size() == 1);
}
