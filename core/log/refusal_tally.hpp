#pragma once
// Refusals for the human log at the default level (docs/sessions.md "Refusals in the human log"): the
// access log has a vless.reject line for each, but an operator watching journalctl must see that every
// client is being refused too, without a line per scanner probe. Per reason: the first refusal after
// a quiet second is reported at once, the others of that second are counted and reported by due()
// once the second is over: at most one line per reason per second, each with its count and the last
// refusal's client as a sample. Counting only; the caller writes the lines. Thread-safe.
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace vlessbench {

class refusal_tally {
 public:
  using clock = std::chrono::steady_clock;
  static constexpr auto period = std::chrono::seconds(1);

  struct report {
    std::string reason;
    std::uint64_t count = 0;
    std::string sample;  // the last refusal counted: who, where, why
  };

  // One refusal; a report when its line is due now.
  std::optional<report> note(std::string_view reason, std::string_view sample, clock::time_point now) {
    const std::lock_guard lock(mutex_);
    auto it = reasons_.find(reason);
    if (it == reasons_.end()) it = reasons_.emplace(std::string(reason), entry{}).first;
    entry& e = it->second;
    ++e.count;
    e.sample.assign(sample);
    if (e.reported && now - *e.reported < period) return std::nullopt;
    return take(it->first, e, now);
  }

  // The counts whose second is over (call about once a period).
  std::vector<report> due(clock::time_point now) {
    const std::lock_guard lock(mutex_);
    std::vector<report> out;
    for (auto it = reasons_.begin(); it != reasons_.end();) {
      entry& e = it->second;
      if (e.count > 0 && (!e.reported || now - *e.reported >= period)) out.push_back(take(it->first, e, now));
      // A reason quiet for a period is forgotten: its next refusal is reported at once again.
      if (e.count == 0 && e.reported && now - *e.reported >= period)
        it = reasons_.erase(it);
      else
        ++it;
    }
    return out;
  }

 private:
  struct entry {
    std::uint64_t count = 0;
    std::string sample;
    std::optional<clock::time_point> reported;
  };
  static report take(const std::string& reason, entry& e, clock::time_point now) {
    report r{reason, e.count, std::move(e.sample)};
    e.count = 0;
    e.sample.clear();
    e.reported = now;
    return r;
  }
  std::mutex mutex_;
  std::map<std::string, entry, std::less<>> reasons_;
};

}  // namespace vlessbench
