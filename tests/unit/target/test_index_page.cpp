// The HTTP target's index page (target/index_page.hpp): escaping, the SVG QR code, when a request
// gets the page, and the nodes the daemon hands it (server/links.cpp).
#include <catch2/catch.hpp>

#include <regex>
#include <string>

#include "core/config/config.hpp"
#include "core/wire/share_link.hpp"
#include "server/links.hpp"
#include "target/index_page.hpp"
#include "target/request_handler.hpp"

using namespace vlessbench;

namespace {

http::request get(std::string target, std::string accept = {}, std::string method = "GET") {
  http::request r;
  r.method = std::move(method);
  r.target = std::move(target);
  if (!accept.empty()) r.headers.push_back({"Accept", accept});
  return r;
}

// The modules an SVG from qr_svg paints, read back from its path ("Mx yhNv1h-Nz" runs), without
// the quiet zone: what a scanner would see.
target::qr_matrix modules_of(const std::string& svg, int width, int quiet) {
  target::qr_matrix m;
  m.width = width;
  m.dark.assign(static_cast<std::size_t>(width * width), false);
  const std::regex run(R"(M(\d+) (\d+)h(\d+)v1h-(\d+)z)");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), run); it != std::sregex_iterator(); ++it) {
    const int x = std::stoi((*it)[1]) - quiet, y = std::stoi((*it)[2]) - quiet, n = std::stoi((*it)[3]);
    REQUIRE(n == std::stoi((*it)[4]));
    for (int i = 0; i < n; ++i) {
      REQUIRE((x + i >= 0 && x + i < width && y >= 0 && y < width));
      m.dark[static_cast<std::size_t>(y * width + x + i)] = true;
    }
  }
  return m;
}

constexpr const char* two_nodes = R"(
[[users]]
name = "mac"
uuid = "7d3c1f3e-58a8-4a6b-9a53-5d2b8f0a1c11"
[[vless]]
name = "default-ack"
listen = "127.0.0.1:8443"
tcp = { quickack = "kernel" }
[[vless]]
name = "quickack"
listen = "127.0.0.1:8444"
tcp = { quickack = "on" }
[[vless]]
name = "ws"
listen = "127.0.0.1:8445"
transport = "ws"
path = "/ws"
[[target]]
name = "http"
listen = "127.0.0.1:8080"
index_links = true
[[target]]
name = "plain"
listen = "127.0.0.1:8081"
[[target]]
name = "named"
listen = "127.0.0.1:8082"
index_links = true
index_host = "Bench-VM.example."
)";

}  // namespace

TEST_CASE("index page: html_escape covers the five markup characters", "[index_page]") {
  CHECK(target::html_escape(R"(<script>"x"&'y'</script>)") ==
        "&lt;script&gt;&quot;x&quot;&amp;&#39;y&#39;&lt;/script&gt;");
  CHECK(target::html_escape("vless://u@h:1?a=1&b=2#n") == "vless://u@h:1?a=1&amp;b=2#n");
  CHECK(target::html_escape("") == "");
}

TEST_CASE("index page: qr_svg paints exactly the matrix's dark modules", "[index_page]") {
  // 3x3: a run of two, a lone module, a full row.
  target::qr_matrix m{3, {true, true, false, false, false, true, true, true, true}};
  const std::string svg = target::qr_svg(m, 4);
  CHECK(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 11 11\""));
  CHECK(svg.find("d=\"M4 4h2v1h-2zM6 5h1v1h-1zM4 6h3v1h-3z\"") != std::string::npos);
  CHECK(modules_of(svg, 3, 4).dark == m.dark);

  // A real code (libqrencode's, as the daemon makes it) read back from its SVG is the same code.
  const std::string link =
      "vless://7d3c1f3e-58a8-4a6b-9a53-5d2b8f0a1c11@10.77.0.2:8443?encryption=none&"
      "security=tls&sni=localhost&allowInsecure=1&type=tcp#default-ack-mac";
  const auto qr = qr_modules(link);
  REQUIRE(qr.width >= 21);
  CHECK((qr.width - 17) % 4 == 0);  // a QR version's size
  CHECK(modules_of(target::qr_svg(qr), qr.width, 4).dark == qr.dark);
  CHECK(target::qr_svg(qr).find("viewBox=\"0 0 " + std::to_string(qr.width + 8) + " ") != std::string::npos);

  CHECK(target::qr_svg(target::qr_matrix{}).empty());
  CHECK(target::qr_svg(target::qr_matrix{2, {true}}).empty());  // size does not match the width
}

TEST_CASE("index page: only a browser's GET / gets it, the runner's / is unchanged", "[index_page]") {
  const auto plain = target::plan_response(get("/"));
  CHECK_FALSE(plain.index_page);
  CHECK(plain.body == "vlessbench target\n");
  CHECK(plain.content_type == "text/plain");
  CHECK(target::plan_response(get("/", "*/*")).body == "vlessbench target\n");
  CHECK(target::plan_response(get("/", "application/json")).body == "vlessbench target\n");

  const auto page =
      target::plan_response(get("/", "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,*/*;q=0.8"));
  CHECK(page.index_page);
  CHECK(page.body.empty());  // filled by the connection from the daemon's nodes
  CHECK(page.content_type == "text/html; charset=utf-8");
  CHECK(target::plan_response(get("/", "application/json, TEXT/HTML;q=0.5")).index_page);
  const auto head = target::plan_response(get("/", "text/html", "HEAD"));
  CHECK((head.index_page && head.head_only));
  // The probe's samples on / stay samples whatever a browser puts in Accept.
  CHECK(target::plan_response(get("/?probe=k3x9&seq=1", "text/html")).body == "vlessbench target\n");
  CHECK_FALSE(target::plan_response(get("/generate_204", "text/html")).index_page);
  CHECK(target::plan_response(get("/", "text/html", "POST")).status == 405);

  const std::string page_head = target::format_head(page, 100, "direct", "", true);
  CHECK(page_head.find("Content-Security-Policy: default-src 'none'; style-src 'unsafe-inline';") != std::string::npos);
  CHECK(page_head.find("Vary: Accept\r\n") != std::string::npos);
  CHECK(page_head.find("Cache-Control: no-store\r\n") != std::string::npos);
  const std::string plain_head = target::format_head(plain, plain.body.size(), "direct", "", true);
  CHECK(plain_head ==
        "HTTP/1.1 200 OK\r\nServer: vlessbenchd\r\nContent-Type: text/plain\r\nContent-Length: 18\r\n"
        "Cache-Control: no-store\r\nX-Vlessbench-Route: direct\r\nConnection: keep-alive\r\n\r\n");
}

TEST_CASE("index page: the daemon's nodes for a target with index_links", "[index_page]") {
  const config cfg = parse_config(two_nodes, "index.toml");
  const auto c = index_content_of(cfg, "http", "10.77.0.2");
  REQUIRE(c.links);
  CHECK(c.host == "10.77.0.2");
  // Raw TLS listeners have a Vision entry each: 2 x 2, and the ws listener's one.
  REQUIRE(c.nodes.size() == 5);
  CHECK(c.nodes[0].name == "default-ack-mac");
  CHECK(c.nodes[1].name == "default-ack-mac-vision");
  CHECK(c.nodes[1].vision);
  CHECK(c.nodes[2].name == "quickack-mac");
  CHECK(c.nodes[0].quickack == "kernel");
  CHECK(c.nodes[2].quickack == "on");
  CHECK(c.nodes[4].transport == "ws");
  CHECK(c.nodes[4].listener == "ws");
  for (const auto& n : c.nodes) {
    std::string reason;
    const auto link = parse_share_link(n.link, reason);
    INFO(n.link << ": " << reason);
    REQUIRE(link);
    CHECK(link->host == "10.77.0.2");
    CHECK(link->name == n.name);
    CHECK(n.user == "mac");
    CHECK(n.qr.width > 0);
  }
  CHECK(index_content_of(cfg, "http", "::1").nodes[0].link.find("@[::1]:8443?") != std::string::npos);
  // index_host wins over the browser's host; normalised when read.
  const auto named = index_content_of(cfg, "named", "10.77.0.2");
  CHECK(named.host == "bench-vm.example");
  CHECK(named.nodes.at(0).link.find("@bench-vm.example:8443?") != std::string::npos);
  // Off, or not a target of this config: nothing.
  CHECK_FALSE(index_content_of(cfg, "plain", "10.77.0.2").links);
  CHECK(index_content_of(cfg, "plain", "10.77.0.2").nodes.empty());
  CHECK_FALSE(index_content_of(cfg, "nope", "10.77.0.2").links);
}

TEST_CASE("index page: rendered with every value escaped, and no link when off", "[index_page]") {
  const config cfg = parse_config(two_nodes, "index.toml");
  const std::string page = target::index_page(index_content_of(cfg, "http", "10.77.0.2"));
  CHECK(page.starts_with("<!doctype html>"));
  CHECK(page.find("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">") != std::string::npos);
  CHECK(page.find("<h2>quickack-mac</h2>") != std::string::npos);
  CHECK(page.find("quickack: tcp quickack=on (QUICKACK after every read)") != std::string::npos);
  CHECK(page.find("default-ack: tcp quickack=kernel (the kernel's delayed ACK)") != std::string::npos);
  CHECK(page.find("encryption=none&amp;security=tls") != std::string::npos);
  CHECK(page.find("&security") == std::string::npos);  // every & in a link escaped
  CHECK(page.find("<svg") != std::string::npos);
  CHECK(page.find("href=\"/probe\"") != std::string::npos);
  CHECK(page.find("<script") == std::string::npos);

  target::index_content hostile;
  hostile.links = true;
  hostile.host = "\"><script>x</script>";
  hostile.nodes.push_back({"n<b>", "l\"", "u'", "tls", "on", false, "vless://a\"onload=x", {}});
  const std::string bad = target::index_page(hostile);
  CHECK(bad.find("<script") == std::string::npos);
  CHECK(bad.find("<b>") == std::string::npos);
  CHECK(bad.find("href=\"vless://a&quot;onload=x\"") != std::string::npos);

  const std::string off = target::index_page(index_content_of(cfg, "plain", "10.77.0.2"));
  CHECK(off.find("vless://") == std::string::npos);
  CHECK(off.find("7d3c1f3e") == std::string::npos);
  CHECK(off.find("vlessbenchd links") != std::string::npos);
  CHECK(off.find("index_links") != std::string::npos);
  CHECK(off.find("href=\"/probe\"") != std::string::npos);

  target::index_content none;
  none.links = true;
  none.problem = "<no listener>";
  CHECK(target::index_page(none).find("No node to show: &lt;no listener&gt;.") != std::string::npos);
}

TEST_CASE("index page: index_links and index_host are checked", "[index_page][config]") {
  const std::string base = "[[target]]\nname = \"t\"\nlisten = \"127.0.0.1:8080\"\n";
  CHECK_FALSE(parse_config(base, "x.toml").target.at(0).index_links);
  CHECK(parse_config(base + "index_links = true\n", "x.toml").target.at(0).index_links);
  auto error_of = [](const std::string& text) -> std::string {
    try {
      parse_config(text, "x.toml");
    } catch (const config_error& e) {
      return e.what();
    }
    return "<accepted>";
  };
  CHECK_THAT(error_of(base + "index_links = \"yes\"\n"), Catch::Contains("index_links"));
  CHECK_THAT(error_of(base + "index_host = \"<b>\"\n"),
             Catch::Contains("index_host") && Catch::Contains("bad character in host name"));
  CHECK_THAT(error_of(base + "index_host = \"vm:8080\"\n"), Catch::Contains("index_host"));
  CHECK(parse_config(base + "index_host = \"[fd00::2]\"\n", "x.toml").target.at(0).index_host == "fd00::2");
  CHECK_THAT(error_of("[[banner]]\nname = \"b\"\nlisten = \"127.0.0.1:8080\"\nindex_links = true\n"),
             Catch::Contains("index_links"));
}

TEST_CASE("index page: nodes are capped", "[index_page]") {
  // 33 users on one raw TLS listener: 66 nodes (each with its Vision twin), 64 shown.
  std::string text =
      "[[vless]]\nname = \"v\"\nlisten = \"127.0.0.1:8443\"\n[[target]]\nname = \"t\"\n"
      "listen = \"127.0.0.1:8080\"\nindex_links = true\n";
  for (int i = 0; i < 33; ++i)
    text += "[[users]]\nname = \"u" + std::to_string(i) + "\"\nuuid = \"7d3c1f3e-58a8-4a6b-9a53-5d2b8f0a1c" +
            (i < 10 ? "0" : "") + std::to_string(i) + "\"\n";
  const auto many = std::make_shared<const config>(parse_config(text, "many.toml"));
  const auto c = index_content_of(*many, "t", "10.0.0.1");
  CHECK(c.nodes.size() == max_index_nodes);
  CHECK(c.left_out == 2);
  CHECK(target::index_page(c).find("And 2 more, not shown here") != std::string::npos);
}

TEST_CASE("index page: only the target's own names get it, rendered once per config, target and host", "[index_page]") {
  index_cache cache;
  const auto local = asio::ip::make_address("127.0.0.1");
  const auto first = std::make_shared<const config>(
      parse_config(std::string(two_nodes) + "[admin]\nhosts = [\"a.example\", \"b.example\"]\n", "index.toml"));
  using outcome = index_cache::outcome;
  const auto a = cache.get(first, "http", "a.example:8080", local);
  REQUIRE(a.how == outcome::rendered);
  CHECK(a.answer.page->find("@a.example:8443") != std::string::npos);
  const auto again = cache.get(first, "http", "A.Example", local);
  CHECK(again.how == outcome::cached);
  CHECK(again.answer.page == a.answer.page);  // the same rendered page, shared
  CHECK(cache.get(first, "http", "b.example", local).answer.page->find("@b.example:8443") != std::string::npos);
  const auto lit = cache.get(first, "http", "127.0.0.1:8080", local);
  CHECK(lit.how == outcome::rendered);
  CHECK(lit.answer.page->find("@127.0.0.1:8443") != std::string::npos);
  CHECK(cache.get(first, "http", std::nullopt, local).how == outcome::cached);  // no Host: the address's page
  CHECK(cache.get(first, "http", "localhost", local).how == outcome::rendered);
  // DNS rebinding: a name or address the target is not is refused before anything is rendered.
  for (const char* foreign : {"rebind.attacker.example", "10.9.9.9", "[::1]", "", "a.example.attacker.example"}) {
    INFO(foreign);
    const auto r = cache.get(first, "http", foreign, local);
    CHECK(r.how == outcome::misdirected);
    CHECK(r.answer.misdirected);
    CHECK_FALSE(r.answer.page);
  }
  // A browser rotating Host names renders nothing more: the allowed pages are still the cached ones.
  for (int i = 0; i < 200; ++i)
    CHECK(cache.get(first, "http", "h" + std::to_string(i) + ".example", local).how == outcome::misdirected);
  CHECK(cache.get(first, "http", "a.example", local).how == outcome::cached);
  // Without links there is nothing to steal: any Host gets the page that says where links are.
  const auto plain = cache.get(first, "plain", "rebind.attacker.example", local);
  CHECK_FALSE(plain.answer.misdirected);
  CHECK(plain.answer.page->find("vless://") == std::string::npos);
  // index_host: its own name is accepted too, and every allowed Host gets the one page.
  CHECK(cache.get(first, "named", "bench-vm.example", local).how == outcome::rendered);
  CHECK(cache.get(first, "named", "127.0.0.1", local).how == outcome::cached);
  CHECK(cache.get(first, "named", "rebind.attacker.example", local).how == outcome::misdirected);
  // A reloaded config (a new value, as the daemon swaps it) renders again, never from the old pages.
  std::string renamed = std::string(two_nodes) + "[admin]\nhosts = [\"a.example\"]\n";
  renamed.replace(renamed.find("name = \"quickack\""), 17, "name = \"quick-2\"");
  const auto second = std::make_shared<const config>(parse_config(renamed, "index.toml"));
  const auto re = cache.get(second, "http", "a.example", local);
  CHECK(re.how == outcome::rendered);
  CHECK(re.answer.page->find("quick-2-mac") != std::string::npos);
  CHECK(cache.get(second, "http", "b.example", local).how == outcome::misdirected);  // no longer a name of it
}
