#pragma once
// What makes a posted probe result proof (docs/probe.md "The results token"): each probe page load
// gets a run id and a token from the daemon, an HMAC under a per-process random key over
// run|client|expiry, so only a page the daemon served to that client can post; a token is good
// once and for ttl. While the run lasts, the target notes each sample request it serves
// (/generate_204?probe=RUN&seq=N): its route and session and the daemon's own VLESS phase, so a
// posted sample is verified against what the daemon saw, never taken on trust. Bounded: at most
// max_runs runs noted (the oldest dropped first), max_samples per run, max_used spent tokens.
// Thread-safe (targets may run on several threads).
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "core/wire/probe_result.hpp"

namespace vlessbench::target {

class probe_runs {
 public:
  using clock = std::chrono::steady_clock;
  static constexpr auto ttl = std::chrono::minutes(15);
  static constexpr std::size_t max_runs = 256, max_used = 4096, max_samples = probe_max_samples;

  probe_runs();  // a fresh random key

  struct issued {
    std::string run, token;
  };
  // client: the address the page was served to (the VLESS client's, through a relay).
  issued issue(std::string_view client, clock::time_point now);

  // "" when the token is good for run and client (and spends it), else the refusal's reason:
  // no_token, bad_token, expired_token, used_token, tokens_busy.
  std::string_view redeem(std::string_view run, std::string_view client, std::string_view token, clock::time_point now);

  struct seen {
    bool vless = false;
    std::uint64_t session = 0;
    std::optional<double> vless_ms;  // the daemon's own VLESS phase for the session
  };
  // A sample request served; ignored unless run was issued and is live.
  void observe(std::string_view run, std::uint64_t seq, const seen& s, clock::time_point now);
  // Marks each sample verified (it names the route and session the daemon served that request on)
  // and gives a verified VLESS sample the daemon's own VLESS phase. Returns how many verified.
  std::size_t verify(probe_result& r) const;

 private:
  std::string mac(std::string_view run, std::string_view client, std::int64_t expiry) const;
  void purge(clock::time_point now);

  struct run_notes {
    clock::time_point expiry;
    std::map<std::uint64_t, seen> samples;
  };
  mutable std::mutex mutex_;
  std::string key_;
  std::map<std::string, run_notes, std::less<>> runs_;
  std::deque<std::string> run_order_;                           // oldest first
  std::map<std::string, clock::time_point, std::less<>> used_;  // spent tokens until they expire
};

}  // namespace vlessbench::target
