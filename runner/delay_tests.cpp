// `vlessbench clients --delay-tests` (docs/clients.md "The clients' own delay tests"): for each node
// and core, the core's own delay test where it can be reached from outside (mihomo's external
// controller, unified-delay off and on), else the client's documented formula run through the
// core's local entry and labelled as an emulation; beside each, the runner's true new and reused
// request times through the same entry, and the daemon's phases of the very requests the delay
// test made (found in the daemon's access log by a tag in their URL). One table.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/wire/http_parser.hpp"
#include "core/wire/percent.hpp"
#include "runner/clients_detail.hpp"
#include "runner/measure.hpp"
#include "runner/proxy_protocol.hpp"
#include "runner/stats.hpp"

namespace vlessbench::runner::clients_detail {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

double ms_since(steady::time_point t0) { return std::chrono::duration<double, std::milli>(steady::now() - t0).count(); }

// A blocking loopback TCP connection with 5 s timeouts, closed when it goes.
class loopback_conn {
 public:
  explicit loopback_conn(std::uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return;
    const timeval tv{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    const int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~loopback_conn() {
    if (fd_ >= 0) ::close(fd_);
  }
  loopback_conn(const loopback_conn&) = delete;
  loopback_conn& operator=(const loopback_conn&) = delete;
  bool ok() const { return fd_ >= 0; }
  bool send_all(std::string_view data) const {
    return ok() && ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(data.size());
  }
  // One response: its status (0 when none came, why says why) and its body (none for HEAD, 204 and
  // a CONNECT's 2xx; Content-Length, else to the close).
  int read_response(std::string& body, std::string& why, bool no_body) {
    body.clear();
    for (;;) {
      const auto r = http::parse_response(in_);
      if (r.invalid()) {
        why = "bad response: " + std::string(r.reason);
        return 0;
      }
      if (r.complete()) {
        in_.erase(0, r.consumed);
        const int status = r.value.status;
        if (no_body || status == 204 || status == 304) return status;
        while (!r.value.content_length || in_.size() < *r.value.content_length)
          if (!fill()) break;
        const std::size_t n =
            r.value.content_length ? std::min<std::size_t>(*r.value.content_length, in_.size()) : in_.size();
        body = in_.substr(0, n);
        in_.erase(0, n);
        return status;
      }
      if (!fill()) {
        why = "closed before a response";
        return 0;
      }
    }
  }

 private:
  bool fill() {
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) return false;
    in_.append(buf, static_cast<std::size_t>(n));
    return in_.size() < (1U << 20);
  }
  int fd_ = -1;
  std::string in_;
};

// One figure of the table: what a delay test (or its emulation) reported, and which requests it made.
struct delay_row {
  std::string core, node, test;
  bool emulated = false;
  std::vector<double> says_ms;  // one per test run that gave a number
  std::string tag;              // in the URL of every request the test made
  std::string error;            // the last failure, when a run gave no number
  double new_ms = -1, reused_ms = -1;
};

std::string delay_url(const target_url& t, const std::string& tag) {
  return "http://" + t.authority() + "/generate_204?vbdelay=" + tag;
}

// mihomo's controller: GET /proxies/NAME/delay?url=...&timeout=... -> {"delay": ms}.
void mihomo_delay(std::uint16_t controller, const std::string& proxy, const target_url& t, delay_row& row) {
  loopback_conn c(controller);
  const std::string path =
      "/proxies/" + percent_encode(proxy) + "/delay?url=" + percent_encode(delay_url(t, row.tag)) + "&timeout=5000";
  std::string body, why;
  if (!c.send_all("GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")) {
    row.error = "controller: no connection";
    return;
  }
  const int status = c.read_response(body, why, false);
  const auto j = nlohmann::json::parse(body, nullptr, false);
  if (status == 200 && j.is_object() && j.contains("delay") && j["delay"].is_number()) {
    row.says_ms.push_back(j["delay"].get<double>());
    return;
  }
  // mihomo answers 503 for a delay of 0 ms too (a reused HEAD under a millisecond, unified-delay on).
  std::string text = body.substr(0, 120) + why;
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  row.error = "controller answered " + std::to_string(status) + " " + text;
}

// A tunnel through a core's HTTP entry: CONNECT to the target, its 2xx read.
bool open_tunnel(loopback_conn& c, const target_url& t, std::string& why) {
  std::string body;
  if (!c.send_all(format_connect_request(t.authority()))) {
    why = "entry: no connection";
    return false;
  }
  const int status = c.read_response(body, why, true);
  if (status / 100 != 2) {
    if (status) why = "CONNECT answered " + std::to_string(status);
    return false;
  }
  return true;
}

// One request on an open tunnel, timed from the send to its response head; < 0 on failure.
double timed_request(loopback_conn& c, const std::string& method, const target_url& t, const std::string& tag,
                     bool close, std::string& why) {
  const std::string req = method + " /generate_204?vbdelay=" + tag + " HTTP/1.1\r\nHost: " + t.authority() +
                          "\r\nUser-Agent: vlessbench-delay-test\r\n" + (close ? "Connection: close\r\n" : "") + "\r\n";
  std::string body;
  const auto t0 = steady::now();
  if (!c.send_all(req)) {
    why = "send failed";
    return -1;
  }
  const int status = c.read_response(body, why, method == "HEAD");
  if (status != 204) {
    if (status) why = method + " answered " + std::to_string(status);
    return -1;
  }
  return ms_since(t0);
}

// v2rayN's real delay: two keep-alive GETs 100 ms apart on one connection through the core, the
// minimum reported (the first one includes the dial).
void emulate_v2rayn(std::uint16_t entry, const target_url& t, delay_row& row) {
  const auto t0 = steady::now();
  loopback_conn c(entry);
  std::string why;
  if (!open_tunnel(c, t, why)) {
    row.error = why;
    return;
  }
  const double connect_ms = ms_since(t0);
  const double first = timed_request(c, "GET", t, row.tag, false, why);
  std::this_thread::sleep_for(100ms);
  const double second = first < 0 ? -1 : timed_request(c, "GET", t, row.tag, true, why);
  if (first < 0 || second < 0) {
    row.error = why;
    return;
  }
  row.says_ms.push_back(std::min(connect_ms + first, second));
}

// sing-box's urltest: HEAD, the timer reset after the (lazy) dial.
void emulate_singbox(std::uint16_t entry, const target_url& t, delay_row& row) {
  loopback_conn c(entry);
  std::string why;
  const double ms = open_tunnel(c, t, why) ? timed_request(c, "HEAD", t, row.tag, true, why) : -1;
  if (ms < 0)
    row.error = why;
  else
    row.says_ms.push_back(ms);
}

// Xray's observatory: GET on a new connection, the dial included.
void emulate_observatory(std::uint16_t entry, const target_url& t, delay_row& row) {
  const auto t0 = steady::now();
  loopback_conn c(entry);
  std::string why;
  const double ms = open_tunnel(c, t, why) ? timed_request(c, "GET", t, row.tag, true, why) : -1;
  if (ms < 0)
    row.error = why;
  else
    row.says_ms.push_back(ms_since(t0));
}

// The runner's own new-connection and reused times through the same entry (medians).
void true_times(std::uint16_t entry, const target_url& t, int count, delay_row& row) {
  measure_options o;
  o.target = t;
  o.target.path = "/generate_204";
  std::string reason;
  for (const std::string& arg : {std::string("direct=direct"), "core=http://127.0.0.1:" + std::to_string(entry)})
    if (auto p = parse_path_arg(arg, reason)) o.paths.push_back(std::move(*p));
  const auto baseline = finalize_paths(o.paths, reason);
  if (!baseline) return;
  o.baseline = *baseline;
  o.new_count = count;
  o.reuse_count = count;
  o.warmup = 1;
  o.run_id = "delay-" + row.tag;
  std::vector<double> fresh, reused;
  for (const auto& s : measure(o))
    if (s.path == "core" && s.ok)
      (s.mode == sample_mode::new_connection ? fresh : reused).push_back(static_cast<double>(s.ns) / 1e6);
  row.new_ms = stats::median(fresh).value_or(-1);
  row.reused_ms = stats::median(reused).value_or(-1);
}

// The daemon's phases of the sessions that carried a row's requests (its access log: http.request
// lines whose path carries the tag, then those sessions' vless.session lines), medians in ms.
struct daemon_phases {
  std::size_t requests = 0, sessions = 0, sessions_asked = 0;
  double tls_ms = -1, header_wait_ms = -1, connect_ms = -1;
};

std::map<std::string, daemon_phases> read_phases(const fs::path& log, const std::vector<delay_row>& rows) {
  std::map<std::string, std::vector<std::uint64_t>> by_tag;
  std::map<std::uint64_t, nlohmann::json> sessions;
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object()) continue;
    const std::string event = j.value("event", "");
    if (event == "http.request" && j.contains("vless_session") && j["vless_session"].is_number_unsigned()) {
      const std::string path = j.value("path", "");
      const auto at = path.find("vbdelay=");
      if (at != std::string::npos) by_tag[path.substr(at + 8)].push_back(j["vless_session"].get<std::uint64_t>());
    } else if (event == "vless.session" && j.contains("session") && j["session"].is_number_unsigned()) {
      sessions[j["session"].get<std::uint64_t>()] = j.value("phases_us", nlohmann::json::object());
    }
  }
  std::map<std::string, daemon_phases> out;
  for (const auto& row : rows) {
    daemon_phases& d = out[row.tag];
    const auto& ids = by_tag[row.tag];
    d.requests = ids.size();
    std::vector<std::uint64_t> unique(ids);
    std::sort(unique.begin(), unique.end());
    unique.erase(std::unique(unique.begin(), unique.end()), unique.end());
    d.sessions_asked = unique.size();
    std::vector<double> tls, wait, connect;
    for (const auto id : unique) {
      const auto it = sessions.find(id);
      if (it == sessions.end()) continue;
      ++d.sessions;
      const auto& p = it->second;
      const double ready = p.value("upgrade_done", p.value("tls_done", 0.0));
      tls.push_back(p.value("tls_done", 0.0) / 1e3);
      wait.push_back((p.value("header_complete", 0.0) - ready) / 1e3);
      connect.push_back((p.value("upstream_connected", 0.0) - p.value("header_complete", 0.0)) / 1e3);
    }
    d.tls_ms = stats::median(tls).value_or(-1);
    d.header_wait_ms = stats::median(wait).value_or(-1);
    d.connect_ms = stats::median(connect).value_or(-1);
  }
  return out;
}

std::string cell(double v, bool signed_value = false) {
  if (v < 0 && !signed_value) return "-";
  std::ostringstream o;
  o << std::fixed << std::setprecision(2) << v;
  return o.str();
}

void print_table(const std::vector<delay_row>& rows, const std::map<std::string, daemon_phases>& phases,
                 nlohmann::ordered_json& out) {
  std::cout << "what each client's delay test says beside what a request costs through it (ms, medians)\n"
            << std::left << std::setw(10) << "core" << std::setw(14) << "node" << std::setw(58) << "delay test"
            << std::right << std::setw(8) << "says" << std::setw(8) << "new" << std::setw(8) << "reused"
            << std::setw(10) << "left out"
            << "  daemon: sessions tls header_wait connect\n";
  for (const auto& r : rows) {
    const auto& d = phases.at(r.tag);
    const double says = stats::median(r.says_ms).value_or(-1);
    // What a new request costs that the client's figure does not show (negative: it shows more).
    const bool both = says >= 0 && r.new_ms >= 0;
    const double left_out = both ? r.new_ms - says : 0;
    const std::string test = r.test + (r.emulated ? " (emulated)" : "");
    std::cout << std::left << std::setw(10) << r.core << std::setw(14) << r.node.substr(0, 13) << std::setw(58) << test
              << std::right << std::setw(8) << cell(says) << std::setw(8) << cell(r.new_ms) << std::setw(8)
              << cell(r.reused_ms) << std::setw(10) << (both ? cell(left_out, true) : "-") << "  " << d.sessions << " "
              << cell(d.tls_ms) << " " << cell(d.header_wait_ms) << " " << cell(d.connect_ms)
              << (r.says_ms.empty() ? "  (" + r.error + ")" : std::string()) << "\n";
    out.push_back({{"core", r.core},
                   {"node", r.node},
                   {"test", r.test},
                   {"emulated", r.emulated},
                   {"says_ms", r.says_ms},
                   {"says_median_ms", says},
                   {"new_median_ms", r.new_ms},
                   {"reused_median_ms", r.reused_ms},
                   {"left_out_ms", both ? nlohmann::ordered_json(left_out) : nlohmann::ordered_json()},
                   {"tag", r.tag},
                   {"error", r.error},
                   {"daemon",
                    {{"requests", d.requests},
                     {"sessions", d.sessions},
                     {"tls_ms", d.tls_ms},
                     {"header_wait_ms", d.header_wait_ms},
                     {"connect_ms", d.connect_ms}}}});
  }
}

// One core process for a node; mihomo with its controller and unified-delay on or off.
std::unique_ptr<core_process> start_core(const core_kind& k, const fs::path& exe, const share_link& node,
                                         const fs::path& dir, std::mt19937& rng, std::uint16_t controller, bool unified,
                                         const std::optional<target_url>& target) {
  fs::create_directories(dir);
  auto p = std::make_unique<core_process>();
  p->name = dir.filename().string();
  p->port = free_port(rng);
  std::string text = config_text(k, node, p->port);
  if (controller)
    text += "external-controller: 127.0.0.1:" + std::to_string(controller) +
            "\nunified-delay: " + (unified ? "true" : "false") + "\n";
  const fs::path config = dir / (std::string("config") + k.suffix);
  std::ofstream(config) << text;
  if (!config_accepted(k, exe, config, dir, node.name) || !entry_opened(*p, k, exe, config, dir) ||
      !entry_ready(*p, p->name, target))
    return nullptr;
  return p;
}

using test_fn = void (*)(std::uint16_t, const target_url&, delay_row&);

// The rows of one node: each core's tests, run count times, with the true times beside.
void run_node(const clients_args& a, const share_link& node, const core_list& cores, const target_url& t,
              const fs::path& work, std::vector<delay_row>& rows) {
  std::mt19937 rng(std::random_device{}());
  const std::string node_part = path_name_part(node.name);
  auto add = [&](const std::string& core, const std::string& test, bool emulated) -> delay_row& {
    delay_row r{core, node.name, test, emulated};
    r.tag = "r" + std::to_string(rows.size());
    rows.push_back(std::move(r));
    return rows.back();
  };
  for (const auto& [kind, exe] : cores) {
    const std::string name = kind->name;
    if (!node.flow.empty() && !kind->vision) continue;
    std::vector<std::pair<std::string, test_fn>> emulations;
    if (name == "xray")
      emulations = {{"v2rayN real delay: min of 2 keep-alive GETs", emulate_v2rayn},
                    {"Xray observatory: GET on a new connection", emulate_observatory}};
    if (name == "sing-box") emulations = {{"sing-box urltest: HEAD after the dial", emulate_singbox}};
    for (const bool unified : {false, true}) {
      if (name != "mihomo" && unified) break;
      const std::uint16_t controller = name == "mihomo" ? free_port(rng) : 0;
      const fs::path dir = work / (name + "-" + node_part + (unified ? "-unified" : ""));
      const auto p = start_core(*kind, exe, node, dir, rng, controller, unified, t);
      if (!p || (name != "mihomo" && emulations.empty())) continue;
      delay_row base;
      true_times(p->port, t, a.delay_count, base);
      if (name == "mihomo") {
        delay_row& r = add(name, std::string("url-test HEAD, unified-delay ") + (unified ? "on" : "off"), false);
        for (int i = 0; i < a.delay_count; ++i) mihomo_delay(controller, node.name, t, r);
        r.new_ms = base.new_ms;
        r.reused_ms = base.reused_ms;
      }
      for (const auto& [test, fn] : emulations) {
        delay_row& r = add(name, test, true);
        for (int i = 0; i < a.delay_count; ++i) fn(p->port, t, r);
        r.new_ms = base.new_ms;
        r.reused_ms = base.reused_ms;
      }
    }
  }
}

}  // namespace

int do_delay_tests(const clients_args& a, const std::vector<share_link>& nodes, const core_list& cores) {
  std::optional<target_url> target = run_target(a.run_args);
  if (!target || target->scheme != target_scheme::http)
    throw std::runtime_error("--delay-tests needs an http:// --target (the daemon's HTTP target)");
  const fs::path out = a.out;
  const fs::path work = out / "cores";
  fs::create_directories(work);
  std::vector<delay_row> rows;
  for (const auto& node : nodes) run_node(a, node, cores, *target, work, rows);
  if (rows.empty()) throw std::runtime_error("no core could be started (see the lines above)");
  std::map<std::string, daemon_phases> phases;
  // The sessions' lines come at their close: wait (bounded) until every tagged session has one.
  const auto until = steady::now() + 5s;
  for (;;) {
    phases = a.daemon_log.empty() ? std::map<std::string, daemon_phases>{} : read_phases(a.daemon_log, rows);
    const bool whole = std::all_of(rows.begin(), rows.end(), [&](const delay_row& r) {
      const auto it = phases.find(r.tag);
      return it == phases.end() || it->second.sessions == it->second.sessions_asked;
    });
    if (a.daemon_log.empty() || whole || steady::now() >= until) break;
    std::this_thread::sleep_for(200ms);
  }
  for (const auto& r : rows) phases.try_emplace(r.tag);
  nlohmann::ordered_json json = nlohmann::ordered_json::array();
  print_table(rows, phases, json);
  std::ofstream(out / "delay_tests.json") << json.dump(2) << "\n";
  const bool any = std::any_of(rows.begin(), rows.end(), [](const delay_row& r) { return !r.says_ms.empty(); });
  return any ? 0 : 1;
}

}  // namespace vlessbench::runner::clients_detail
