#pragma once
// The config as VLESS sessions on any thread see it at their admission steps, and the sessions
// admitted under it. A reload publishes the new config here; a session authorises its user and
// checks its destination against what is current at that step (docs/configuration.md "Reload"),
// and a session whose user the new config no longer has is ended by the publish. Admission and
// publish share one lock, so no session slips between a reload's check and its sweep.
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "core/net/asio_compat.hpp"
#include "core/config/config.hpp"

namespace vlessbench {

class live_config {
 public:
  using ender = std::function<void()>;  // runs on the session's executor

  std::shared_ptr<const config> current() const {
    const std::lock_guard lock(mutex_);
    return cfg_;
  }

  // Makes next current and ends every admitted session whose user it lacks (its ender is posted
  // to its executor). Returns how many it ends.
  std::size_t publish(std::shared_ptr<const config> next);

  // Admits a session of user: an id to withdraw() with at its end, or nullopt when the current
  // config has no such user (a reload removed it since the caller looked).
  std::optional<std::uint64_t> admit(const uuid_bytes& user, asio::any_io_executor ex, ender end);
  void withdraw(std::uint64_t id);
  std::size_t admitted() const {
    const std::lock_guard lock(mutex_);
    return sessions_.size();
  }

 private:
  struct entry {
    uuid_bytes user;
    asio::any_io_executor executor;
    ender end;
  };
  static bool has_user(const config& cfg, const uuid_bytes& user);
  void end(std::uint64_t id);
  mutable std::mutex mutex_;
  std::shared_ptr<const config> cfg_;
  std::uint64_t next_ = 1;
  std::unordered_map<std::uint64_t, entry> sessions_;
};

// Keeps an admission for its scope (withdrawn however the session's frame ends).
class user_admission {
 public:
  user_admission(live_config& live, std::uint64_t id) : live_(live), id_(id) {}
  ~user_admission() { live_.withdraw(id_); }
  user_admission(const user_admission&) = delete;
  user_admission& operator=(const user_admission&) = delete;

 private:
  live_config& live_;
  std::uint64_t id_;
};

}  // namespace vlessbench
