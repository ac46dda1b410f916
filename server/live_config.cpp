#include "server/live_config.hpp"

#include <algorithm>

#include "core/wire/vless_codec.hpp"

namespace vlessbench {

bool live_config::has_user(const config& cfg, const uuid_bytes& user) {
  return std::any_of(cfg.users.begin(), cfg.users.end(),
                     [&](const user_config& u) { return vless::uuid_equal(u.uuid, user); });
}

std::size_t live_config::publish(std::shared_ptr<const config> next) {
  std::vector<std::pair<std::uint64_t, asio::any_io_executor>> ended;
  {
    const std::lock_guard lock(mutex_);
    cfg_ = std::move(next);
    for (const auto& [id, e] : sessions_)
      if (!has_user(*cfg_, e.user)) ended.emplace_back(id, e.executor);
  }
  for (auto& [id, ex] : ended) asio::post(ex, [this, id = id] { end(id); });
  return ended.size();
}

// On the session's executor, so it cannot end between the lookup and the call; one that was
// withdrawn meanwhile is skipped. The ender runs unlocked (it may withdraw).
void live_config::end(std::uint64_t id) {
  ender e;
  {
    const std::lock_guard lock(mutex_);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return;
    e = std::move(it->second.end);
    sessions_.erase(it);
  }
  e();
}

std::optional<std::uint64_t> live_config::admit(const uuid_bytes& user, asio::any_io_executor ex, ender end) {
  const std::lock_guard lock(mutex_);
  if (!cfg_ || !has_user(*cfg_, user)) return std::nullopt;
  const auto id = next_++;
  sessions_.emplace(id, entry{user, std::move(ex), std::move(end)});
  return id;
}

void live_config::withdraw(std::uint64_t id) {
  const std::lock_guard lock(mutex_);
  sessions_.erase(id);
}

}  // namespace vlessbench
