#pragma once
// What the HTTP target answers, decided without I/O: a parsed request in, a response plan out.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/wire/http_parser.hpp"
#include "core/wire/session_info.hpp"
#include "core/log/state_hub.hpp"

namespace vlessbench::target {

inline constexpr std::uint64_t max_generated_bytes = 64ULL << 30;  // /bytes/N: 64 GiB
inline constexpr std::int64_t max_delay_ms = 60'000;

struct response_plan {
  int status = 200;
  std::string body;                    // small in-memory body
  std::uint64_t generated_bytes = 0;   // /bytes/N: streamed from a constant buffer
  bool sink = false;                   // POST /sink: read and count the body, answer the count
  std::chrono::milliseconds delay{0};  // /delay/MS
  bool head_only = false;              // HEAD: headers as for GET, no body
  bool close = false;                  // ?close=1: answer Connection: close (the probe's new samples)
  bool cors = false;                   // ?probe=RUN: readable by the probe page from another origin
  bool probe_result = false;           // POST /probe/result: read the body, then handle_probe_result
  bool probe_page = false;             // GET /probe: the page with a run id and token (probe_page())
  bool probe_token = false;            // GET /probe/token: {"run":..,"token":..} for the page's next run
  bool index_page = false;             // GET / from a browser (Accept: text/html): target/index_page.hpp
  std::string_view note;               // logged with the request as its error (a refused probe result)
  std::string_view content_type = "text/plain";
  std::uint64_t content_length() const { return generated_bytes ? generated_bytes : body.size(); }
};

response_plan plan_response(const http::request& req);
// For 400 / 431 / 404-style errors decided before or outside plan_response.
response_plan error_response(int status, std::string_view why);
std::string_view status_text(int status);

// POST /probe/result: the posted body (at most probe_max_body bytes, core/wire/probe_result.hpp) in;
// the answer and, for a valid body, the probe.run line out. A refused body is a 400 whose reason
// is the plan's note.
struct probe_post_outcome {
  response_plan plan;
  std::string log_line;                // empty when refused
  std::optional<probe_record> record;  // for the admin dashboard; absent when refused
};
// runs: the daemon's tokens and notes (target/probe_runs.hpp); token: the post's
// X-Vlessbench-Probe-Token; client: the address the token was issued to (probe_client()). A post
// without a good token is a 403 whose note is the reason.
class probe_runs;
probe_post_outcome handle_probe_result(std::string_view body, std::string_view user_agent, std::string_view listener,
                                       std::string_view peer, const route_info* route, probe_runs& runs,
                                       std::string_view token, std::string_view client);
// Whom a probe token is bound to: the VLESS client's address through a relay, else the peer's
// (addresses without port: a page's requests come from many ports).
std::string probe_client(const route_info* route, std::string_view peer);
// A probe sample request (?probe=RUN&seq=N on / or /generate_204): its run and seq.
struct probe_sample_ref {
  std::string_view run;
  std::uint64_t seq = 0;
};
std::optional<probe_sample_ref> probe_sample_of(const http::request& req);

// The response head, CRLF-terminated. route_value is the X-Vlessbench-Route value; timing is the
// Server-Timing value (omitted when empty); node, on the probe's sample answers only, the VLESS
// listener that relayed the request (X-Vlessbench-Node, so the page names the node; omitted when
// empty: a direct request).
std::string format_head(const response_plan& plan, std::uint64_t content_length, std::string_view route_value,
                        std::string_view timing, bool keep_alive, std::string_view node = {});

}  // namespace vlessbench::target
