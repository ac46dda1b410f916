// The access-log events the acceptance checks and `vlessbench verify` read: each one's fields and
// their order, byte for byte (docs/sessions.md "Log events"); only the timestamp varies.
#include <catch2/catch.hpp>

#include <regex>

#include "core/log/access_events.hpp"

using namespace vlessbench;

namespace {

// The line without its "ts" value, which is the time of writing.
std::string without_ts(const std::string& line) {
  static const std::regex ts(R"("ts":"[0-9T:.\-]+Z")");
  return std::regex_replace(line, ts, R"("ts":"T")");
}

}  // namespace

TEST_CASE("vless.reject: from a session, and at accept before a session exists", "[access_log]") {
  CHECK(without_ts(format_event(vless_reject_event{.session = 7,
                                                   .listener = "kernel",
                                                   .client = "192.0.2.1:5000",
                                                   .reason = "dest_not_allowed",
                                                   .phase = "connect",
                                                   .bytes_seen = 42,
                                                   .detail = "10.0.0.1:80",
                                                   .user = "alice",
                                                   .dest = "10.0.0.1:80",
                                                   .duration_us = 1234,
                                                   .ja4 = "t13d1516h2_8daaf6152771_e5627efa2ab1"})) ==
        R"({"event":"vless.reject","ts":"T","session":7,"listener":"kernel","client":"192.0.2.1:5000",)"
        R"("reason":"dest_not_allowed","phase":"connect","bytes_seen":42,)"
        R"("ja4":"t13d1516h2_8daaf6152771_e5627efa2ab1","detail":"10.0.0.1:80","user":"alice",)"
        R"("dest":"10.0.0.1:80","duration_us":1234})"
        "\n");
  CHECK(without_ts(format_event(vless_reject_event{
            .listener = "kernel", .client = "192.0.2.1:5000", .reason = "fd_exhausted", .phase = "accept"})) ==
        R"({"event":"vless.reject","ts":"T","listener":"kernel","client":"192.0.2.1:5000","reason":"fd_exhausted",)"
        R"("phase":"accept","bytes_seen":0})"
        "\n");
}

TEST_CASE("vless.reject: a refused REALITY ClientHello carries its relay to the target", "[access_log]") {
  CHECK(without_ts(format_event(vless_reject_event{
            .session = 3,
            .listener = "reality",
            .client = "192.0.2.1:5000",
            .reason = "reality_server_name",
            .phase = "tls",
            .detail = "SNI not in server_names; relayed to the target",
            .duration_us = 5100,
            .ja4 = "t13d1516h2_8daaf6152771_e5627efa2ab1",
            .groups = "X25519,P-256",
            .key_shares = "X25519",
            .fallback =
                fallback_facts{.duration_us = 4800, .bytes_up = 517, .bytes_down = 2300, .end = "client_eof"}})) ==
        R"({"event":"vless.reject","ts":"T","session":3,"listener":"reality","client":"192.0.2.1:5000",)"
        R"("reason":"reality_server_name","phase":"tls","bytes_seen":0,)"
        R"("ja4":"t13d1516h2_8daaf6152771_e5627efa2ab1","groups":["X25519","P-256"],"key_shares":["X25519"],)"
        R"("detail":"SNI not in server_names; relayed to the target","duration_us":5100,)"
        R"("fallback_us":4800,"fallback_bytes_up":517,"fallback_bytes_down":2300,"fallback_end":"client_eof"})"
        "\n");
  // A target that is down: the dial's time, nothing relayed.
  CHECK(without_ts(
            format_event(vless_reject_event{.listener = "down",
                                            .client = "192.0.2.1:5001",
                                            .reason = "reality_bad_client_hello",
                                            .phase = "tls",
                                            .fallback = fallback_facts{.duration_us = 150, .end = "target_down"}})) ==
        R"({"event":"vless.reject","ts":"T","listener":"down","client":"192.0.2.1:5001",)"
        R"("reason":"reality_bad_client_hello","phase":"tls","bytes_seen":0,)"
        R"("fallback_us":150,"fallback_bytes_up":0,"fallback_bytes_down":0,"fallback_end":"target_down"})"
        "\n");
}

TEST_CASE("config.reload: a failure names its error, a success its changes", "[access_log]") {
  CHECK(without_ts(format_event(config_reload_event{.ok = false, .generation = 3, .error = "f.toml:2: bad"})) ==
        R"({"event":"config.reload","ts":"T","ok":false,"generation":3,"error":"f.toml:2: bad"})"
        "\n");
  CHECK(without_ts(format_event(config_reload_event{.ok = true, .generation = 4, .changes = 2})) ==
        R"({"event":"config.reload","ts":"T","ok":true,"generation":4,"changes":2})"
        "\n");
}

TEST_CASE("http.request: relayed with the runner's labels, and a refused head", "[access_log]") {
  route_info session;
  session.session_id = 9;
  session.user = "bob";
  session.client = "192.0.2.2:6000";
  session.listener = "quick";
  CHECK(
      without_ts(format_event(http_request_event{.listener = "http",
                                                 .peer = "127.0.0.1:40000",
                                                 .route = &session,
                                                 .method = "POST",
                                                 .path = "/sink",
                                                 .status = 200,
                                                 .bytes = 5,
                                                 .bytes_in = 1000,
                                                 .duration_us = 77,
                                                 .run = "r1",
                                                 .seq = "3",
                                                 .path_label = "ctl",
                                                 .ja4 = "t13d1812h1_85036bcba153_d41ae481755e"})) ==
      R"({"event":"http.request","ts":"T","listener":"http","peer":"127.0.0.1:40000","route":"vless",)"
      R"("vless_session":9,"vless_user":"bob","vless_client":"192.0.2.2:6000","vless_listener":"quick",)"
      R"("ja4":"t13d1812h1_85036bcba153_d41ae481755e","method":"POST","path":"/sink","status":200,"bytes":5,"bytes_in":1000,"duration_us":77,"run":"r1",)"
      R"("seq":"3","path_label":"ctl"})"
      "\n");
  CHECK(without_ts(format_event(http_request_event{
            .listener = "http", .peer = "127.0.0.1:40001", .status = 400, .error = "bad request line"})) ==
        R"({"event":"http.request","ts":"T","listener":"http","peer":"127.0.0.1:40001","route":"direct",)"
        R"("status":400,"error":"bad request line"})"
        "\n");
}

TEST_CASE("vless.session: policies, phases (resolved only when reached), tcp_info when read", "[access_log]") {
  session_phases p;
  p.tls_done = 900;
  p.first_vless_byte = 950;
  p.header_complete = 41000;
  p.upstream_connected = 41200;
  p.first_upstream_byte = 41500;
  p.first_client_byte = 41510;
  p.closed = 50000;
  vless_session_event e{.session = 12,
                        .listener = "nagle",
                        .user = "alice",
                        .client = "192.0.2.1:5000",
                        .dest = "127.0.0.1:8080",
                        .cmd = "tcp",
                        .tls_version = "TLSv1.3",
                        .cipher = "TLS_AES_128_GCM_SHA256",
                        .sni = "vlessbench.test",
                        .alpn = "",
                        .ja4 = "t13d1516h2_8daaf6152771_e5627efa2ab1",
                        .policy = {.nodelay = false, .quickack = quickack_mode::on},
                        .upstream_policy = {},
                        .generation = 3,
                        .phases = &p,
                        .stall_suspected = true,
                        .bytes_up = 80,
                        .bytes_down = 200,
                        .close_reason = "client_eof"};
  const std::string head =
      R"({"event":"vless.session","ts":"T","session":12,"listener":"nagle","user":"alice",)"
      R"("client":"192.0.2.1:5000","dest":"127.0.0.1:8080","cmd":"tcp","tls_version":"TLSv1.3",)"
      R"("cipher":"TLS_AES_128_GCM_SHA256","sni":"vlessbench.test","alpn":"",)"
      R"("ja4":"t13d1516h2_8daaf6152771_e5627efa2ab1",)"
      R"("policy":{"nodelay":false,"quickack":"on","upstream_nodelay":true,"upstream_quickack":"kernel",)"
      R"("generation":3},"phases_us":{"tls_done":900,"first_vless_byte":950,"header_complete":41000,)";
  const std::string tail =
      R"("upstream_connected":41200,"first_upstream_byte":41500,"first_client_byte":41510,"closed":50000},)"
      R"("stall_suspected":true,)";
  const std::string end = R"("bytes_up":80,"bytes_down":200,"duration_us":50000,"close_reason":"client_eof"})"
                          "\n";
  CHECK(without_ts(format_event(e)) == head + tail + end);
  p.resolved = 1000;
  e.tcp_info = tcp_info_snapshot{
      .rtt_us = 50, .rttvar_us = 25, .ato_us = 40000, .retransmits = 0, .unacked = 0, .delivery_rate = 1000000};
  CHECK(without_ts(format_event(e)) ==
        head + R"("resolved":1000,)" + tail +
            R"("tcp_info":{"rtt_us":50,"rttvar_us":25,"ato_us":40000,"retransmits":0,"unacked":0,)"
            R"("delivery_rate":1000000},)" +
            end);
  // UDP (command 2): the same line with cmd "udp" and the datagram counts after the bytes.
  e.tcp_info.reset();
  e.cmd = "udp";
  e.packets_up = 4;
  e.packets_down = 3;
  std::string udp_head = head;
  udp_head.replace(udp_head.find(R"("cmd":"tcp")"), 11, R"("cmd":"udp")");
  CHECK(without_ts(format_event(e)) ==
        udp_head + R"("resolved":1000,)" + tail +
            R"("bytes_up":80,"bytes_down":200,"packets_up":4,"packets_down":3,"duration_us":50000,)"
            R"("close_reason":"client_eof"})"
            "\n");
}

TEST_CASE("target.reject: TLS garbage with the library's reason, a handshake timeout without", "[access_log]") {
  CHECK(
      without_ts(format_event(target_reject_event{.listener = "https",
                                                  .peer = "127.0.0.1:40002",
                                                  .reason = "tls_handshake_failed",
                                                  .bytes_seen = 17,
                                                  .detail = "WRONG_VERSION_NUMBER",
                                                  .duration_us = 120,
                                                  .ja4 = "t12i280600_d943125447b4_e7e480e5a997"})) ==
      R"({"event":"target.reject","ts":"T","listener":"https","peer":"127.0.0.1:40002",)"
      R"("reason":"tls_handshake_failed","bytes_seen":17,"ja4":"t12i280600_d943125447b4_e7e480e5a997","detail":"WRONG_VERSION_NUMBER","duration_us":120})"
      "\n");
  CHECK(without_ts(format_event(
            target_reject_event{.listener = "https", .peer = "127.0.0.1:40003", .reason = "handshake_timeout"})) ==
        R"({"event":"target.reject","ts":"T","listener":"https","peer":"127.0.0.1:40003",)"
        R"("reason":"handshake_timeout","bytes_seen":0})"
        "\n");
}

TEST_CASE("banner.connection: relayed with its session, and a direct one cut before its banner", "[access_log]") {
  route_info session;
  session.session_id = 4;
  session.user = "carol";
  session.client = "192.0.2.3:7000";
  session.listener = "kernel";
  CHECK(without_ts(format_event(banner_connection_event{.listener = "banner",
                                                        .peer = "127.0.0.1:40004",
                                                        .route = &session,
                                                        .bytes_in = 6,
                                                        .bytes_out = 50,
                                                        .banner_us = 30,
                                                        .duration_us = 900,
                                                        .close_reason = "peer_eof"})) ==
        R"({"event":"banner.connection","ts":"T","listener":"banner","peer":"127.0.0.1:40004","route":"vless",)"
        R"("vless_session":4,"vless_user":"carol","vless_client":"192.0.2.3:7000","vless_listener":"kernel",)"
        R"("bytes_in":6,"bytes_out":50,"banner_us":30,"duration_us":900,"close_reason":"peer_eof"})"
        "\n");
  CHECK(without_ts(format_event(banner_connection_event{
            .listener = "banner", .peer = "127.0.0.1:40005", .duration_us = 5000, .close_reason = "slow_transfer"})) ==
        R"({"event":"banner.connection","ts":"T","listener":"banner","peer":"127.0.0.1:40005","route":"direct",)"
        R"("bytes_in":0,"bytes_out":0,"duration_us":5000,"close_reason":"slow_transfer"})"
        "\n");
}

TEST_CASE("vless.session cmd mux: sub counts and the frame error after the datagram counts", "[access_log]") {
  session_phases p;
  p.closed = 7000;
  const vless_session_event e{.session = 5,
                              .listener = "l",
                              .user = "u",
                              .client = "192.0.2.1:1",
                              .dest = "v1.mux.cool:0",
                              .cmd = "mux",
                              .phases = &p,
                              .bytes_up = 10,
                              .bytes_down = 20,
                              .subs = 8,
                              .subs_refused = 1,
                              .mux_error = "unknown_status",
                              .close_reason = "mux_error"};
  const std::string line = without_ts(format_event(e));
  CHECK(line.find(R"("cmd":"mux")") != std::string::npos);
  CHECK(line.substr(line.find(R"("bytes_up")")) ==
        R"("bytes_up":10,"bytes_down":20,"subs":8,"subs_refused":1,"mux_error":"unknown_status",)"
        R"("duration_us":7000,"close_reason":"mux_error"})"
        "\n");
}

TEST_CASE("vless.session with Vision: flow, and the vision object after the counts", "[access_log]") {
  session_phases p;
  p.closed = 9000;
  vless_session_event e{.session = 6,
                        .listener = "l",
                        .user = "u",
                        .client = "192.0.2.1:1",
                        .dest = "127.0.0.1:443",
                        .cmd = "tcp",
                        .phases = &p,
                        .bytes_up = 10,
                        .bytes_down = 20,
                        .flow = "xtls-rprx-vision",
                        .vision = vision_facts{.direct_up_us = 4000,
                                               .direct_down_us = 3900,
                                               .padding_up = 1200,
                                               .padding_down = 1300,
                                               .frames_up = 3,
                                               .inner = "tls1.3"},
                        .close_reason = "client_eof"};
  std::string line = without_ts(format_event(e));
  CHECK(line.substr(line.find(R"("bytes_up")")) ==
        R"("bytes_up":10,"bytes_down":20,"flow":"xtls-rprx-vision","vision":{"direct_up_us":4000,)"
        R"("direct_down_us":3900,"padding_up":1200,"padding_down":1300,"frames_up":3,"inner":"tls1.3"},)"
        R"("duration_us":9000,"close_reason":"client_eof"})"
        "\n");
  // Not direct, and a broken padding: the times are left out, the reason is there.
  e.vision = vision_facts{.padding_up = 40, .frames_up = 1, .inner = "none", .error = "vision_bad_command"};
  line = without_ts(format_event(e));
  CHECK(line.find(R"("vision":{"padding_up":40,"padding_down":0,"frames_up":1,"inner":"none",)"
                  R"("error":"vision_bad_command"})") != std::string::npos);
}

TEST_CASE("xhttp.connection: an uplink-only connection over HTTP/1.1 with its POSTs, over HTTP/2 without",
          "[access_log]") {
  CHECK(without_ts(format_event(xhttp_connection_event{
            .session = 9, .listener = "xh", .client = "127.0.0.1:5000", .http = "1.1", .posts = 3})) ==
        R"({"event":"xhttp.connection","ts":"T","session":9,"listener":"xh","client":"127.0.0.1:5000","http":"1.1",)"
        R"("posts":3})"
        "\n");
  CHECK(without_ts(format_event(
            xhttp_connection_event{.session = 10, .listener = "xh", .client = "[::1]:5001", .http = "2"})) ==
        R"({"event":"xhttp.connection","ts":"T","session":10,"listener":"xh","client":"[::1]:5001","http":"2"})"
        "\n");
}

TEST_CASE("vless.sub: a TCP sub-connection, a UDP one in XUDP form, a refused New", "[access_log]") {
  CHECK(without_ts(format_event(vless_sub_event{.session = 5,
                                                .sub = 2,
                                                .mux_id = 7,
                                                .listener = "l",
                                                .user = "u",
                                                .net = "tcp",
                                                .dest = "127.0.0.1:8080",
                                                .bytes_up = 100,
                                                .bytes_down = 2000,
                                                .connect_us = 150,
                                                .duration_us = 9000,
                                                .close_reason = "client_end"})) ==
        R"({"event":"vless.sub","ts":"T","session":5,"sub":2,"mux_id":7,"listener":"l","user":"u","net":"tcp",)"
        R"("dest":"127.0.0.1:8080","bytes_up":100,"bytes_down":2000,"connect_us":150,"duration_us":9000,)"
        R"("close_reason":"client_end"})"
        "\n");
  CHECK(without_ts(format_event(vless_sub_event{.session = 5,
                                                .sub = 3,
                                                .mux_id = 0,
                                                .listener = "l",
                                                .user = "u",
                                                .net = "udp",
                                                .dest = "127.0.0.1:9053",
                                                .xudp = true,
                                                .bytes_up = 8,
                                                .bytes_down = 80,
                                                .packets_up = 2,
                                                .packets_down = 2,
                                                .packets_dropped = 0,
                                                .duration_us = 100,
                                                .close_reason = "error",
                                                .error = "dest_not_allowed",
                                                .detail = "192.0.2.1:53"})) ==
        R"({"event":"vless.sub","ts":"T","session":5,"sub":3,"mux_id":0,"listener":"l","user":"u","net":"udp",)"
        R"("dest":"127.0.0.1:9053","xudp":true,"bytes_up":8,"bytes_down":80,"packets_up":2,"packets_down":2,)"
        R"("packets_dropped":0,"duration_us":100,"close_reason":"error","error":"dest_not_allowed",)"
        R"("detail":"192.0.2.1:53"})"
        "\n");
  CHECK(without_ts(format_event(vless_sub_event{.session = 5,
                                                .mux_id = 9,
                                                .listener = "l",
                                                .user = "u",
                                                .close_reason = "rejected",
                                                .error = "too_many_subs"})) ==
        R"({"event":"vless.sub","ts":"T","session":5,"sub":0,"mux_id":9,"listener":"l","user":"u",)"
        R"("bytes_up":0,"bytes_down":0,"duration_us":0,"close_reason":"rejected","error":"too_many_subs"})"
        "\n");
}

TEST_CASE("udp.packet: one line per flow, relayed or direct", "[access_log]") {
  route_info session;
  session.session_id = 9;
  session.user = "dave";
  session.client = "192.0.2.4:7001";
  session.listener = "kernel";
  CHECK(without_ts(format_event(udp_packet_event{.listener = "udp",
                                                 .peer = "127.0.0.1:40006",
                                                 .route = &session,
                                                 .packets_in = 3,
                                                 .bytes_in = 12,
                                                 .packets_out = 3,
                                                 .bytes_out = 150,
                                                 .duration_us = 2000,
                                                 .close_reason = "idle"})) ==
        R"({"event":"udp.packet","ts":"T","listener":"udp","peer":"127.0.0.1:40006","route":"vless",)"
        R"("vless_session":9,"vless_user":"dave","vless_client":"192.0.2.4:7001","vless_listener":"kernel",)"
        R"("packets_in":3,"bytes_in":12,"packets_out":3,"bytes_out":150,"duration_us":2000,"close_reason":"idle"})"
        "\n");
  // A Mux.Cool sub-connection's flow names the sub after the session.
  session.sub = 4;
  CHECK(without_ts(format_event(udp_packet_event{
                       .listener = "udp", .peer = "127.0.0.1:40006", .route = &session, .close_reason = "idle"}))
            .find(R"("vless_session":9,"vless_sub":4,"vless_user":"dave")") != std::string::npos);
  CHECK(without_ts(
            format_event(udp_packet_event{.listener = "udp", .peer = "127.0.0.1:40007", .close_reason = "stop"})) ==
        R"({"event":"udp.packet","ts":"T","listener":"udp","peer":"127.0.0.1:40007","route":"direct",)"
        R"("packets_in":0,"bytes_in":0,"packets_out":0,"bytes_out":0,"duration_us":0,"close_reason":"stop"})"
        "\n");
}

TEST_CASE("udp.refused: datagrams a UDP target did not answer, one line per reason", "[access_log]") {
  CHECK(without_ts(format_event(udp_refused_event{
            .listener = "udp", .reason = "forged_relay_source", .datagrams = 12, .last_peer = "10.77.23.1:40000"})) ==
        R"({"event":"udp.refused","ts":"T","listener":"udp","reason":"forged_relay_source","datagrams":12,)"
        R"("last_peer":"10.77.23.1:40000"})"
        "\n");
}

TEST_CASE("dns.query: answered through a session, and a malformed one", "[access_log]") {
  route_info session;
  session.session_id = 5;
  session.user = "erin";
  session.client = "192.0.2.5:7002";
  session.listener = "kernel";
  CHECK(without_ts(format_event(dns_query_event{.listener = "dns",
                                                .peer = "127.0.0.1:40008",
                                                .transport = "udp",
                                                .route = &session,
                                                .name = "a.delay-20.vlessbench.test",
                                                .qtype = 1,
                                                .rcode = "NOERROR",
                                                .delay_ms = 20})) ==
        R"({"event":"dns.query","ts":"T","listener":"dns","peer":"127.0.0.1:40008","transport":"udp","route":"vless",)"
        R"("vless_session":5,"vless_user":"erin","vless_client":"192.0.2.5:7002","vless_listener":"kernel",)"
        R"("name":"a.delay-20.vlessbench.test","qtype":1,"rcode":"NOERROR","delay_ms":20})"
        "\n");
  CHECK(without_ts(format_event(dns_query_event{.listener = "dns",
                                                .peer = "127.0.0.1:40009",
                                                .transport = "tcp",
                                                .rcode = "FORMERR",
                                                .error = "pointer_loop"})) ==
        R"({"event":"dns.query","ts":"T","listener":"dns","peer":"127.0.0.1:40009","transport":"tcp","route":"direct",)"
        R"("rcode":"FORMERR","error":"pointer_loop"})"
        "\n");
}

TEST_CASE("probe.run: the page's samples with the daemon's summary", "[access_log]") {
  probe_result r;
  r.run = "k3x9";
  r.new_count = 1;
  r.reuse_count = 1;
  r.verdict = "no_stall";
  r.samples.push_back(probe_sample{.seq = 2,
                                   .path = "target",
                                   .mode = "new",
                                   .ok = true,
                                   .ms = 3.5,
                                   .route = "vless",
                                   .session = 17,
                                   .tls = 1.25,
                                   .vless = 0.05,
                                   .upstream = 0.1,
                                   .verified = true});
  r.samples.push_back(probe_sample{.seq = 4, .path = "target", .mode = "reuse", .ok = false, .route = "unknown"});
  const probe_summary sum = summarize_probe(r);
  route_info post;
  post.session_id = 21;
  CHECK(without_ts(format_event(probe_run_event{.listener = "http",
                                                .peer = "127.0.0.1:40000",
                                                .route = &post,
                                                .user_agent = "Mozilla/5.0 \"x\"",
                                                .result = &r,
                                                .summary = &sum})) ==
        R"({"event":"probe.run","ts":"T","listener":"http","peer":"127.0.0.1:40000","route":"vless",)"
        R"("vless_session":21,"user_agent":"Mozilla/5.0 \"x\"","run":"k3x9","new":1,"reuse":1,"samples":2,"ok":1,)"
        R"("failed":1,"vless_samples":1,"direct_samples":0,"new_median_ms":3.500,"new_p95_ms":3.500,)"
        R"("samples_verified":1,"stall_samples":0,"verdict":"no_stall","page_verdict":"no_stall","per_sample":[)"
        R"({"seq":2,"path":"target","mode":"new","ok":true,"ms":3.500,"route":"vless","session":17,"tls":1.250,)"
        R"("vless":0.050,"upstream":0.100,"stall":false,"verified":true},)"
        R"({"seq":4,"path":"target","mode":"reuse","ok":false,"route":"unknown","verified":false}]})"
        "\n");
}

TEST_CASE("vless.session over xhttp: reused, then the xhttp object of request arrivals", "[access_log][xhttp]") {
  session_phases p;
  p.closed = 90000;
  p.xhttp.get = 120;
  p.xhttp.first_post = 0;
  p.xhttp.post_gaps = 2;
  p.xhttp.post_gap_median = 30100;
  p.xhttp.post_gap_max = 30400;
  p.xhttp.reused = 0;
  vless_session_event e{.session = 7,
                        .listener = "xh",
                        .user = "u",
                        .client = "192.0.2.1:1",
                        .dest = "127.0.0.1:80",
                        .cmd = "tcp",
                        .transport = "xhttp",
                        .reused = false,
                        .phases = &p,
                        .post_spacing = true,
                        .close_reason = "client_eof"};
  const std::string line = without_ts(format_event(e));
  const auto at = line.find(R"("reused")");
  REQUIRE(at != std::string::npos);
  CHECK(line.substr(at, line.find(R"("policy")") - at) ==
        R"("reused":false,"xhttp":{"get_us":120,"first_post_us":0,"post_gaps":2,"post_gap_median_us":30100,)"
        R"("post_gap_max_us":30400,"spacing_wait":true},)");
  // stream-one: its one POST, no GET and no gaps.
  session_phases one;
  one.xhttp.first_post = 0;
  one.xhttp.reused = 1;
  e.phases = &one;
  e.reused = true;
  const std::string l1 = without_ts(format_event(e));
  CHECK(l1.find(R"("reused":true,"xhttp":{"first_post_us":0},)") != std::string::npos);
  // Not XHTTP: no object.
  session_phases none;
  e.phases = &none;
  CHECK(without_ts(format_event(e)).find(R"("xhttp":{)") == std::string::npos);
}
