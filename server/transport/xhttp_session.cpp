#include "server/transport/xhttp_session.hpp"

namespace vlessbench::xhttp {

bool open_pair(session_state& s, std::string& why) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    why = "socketpair: " + std::error_code(errno, std::system_category()).message();
    return false;
  }
  std::error_code e1, e2;
  s.ours.assign(tcp::v4(), fds[0], e1);
  s.theirs.assign(tcp::v4(), fds[1], e2);
  return true;
}

awaitable<void> uplink(std::shared_ptr<session_state> s) {
  std::string chunk;
  for (;;) {
    if (!s->up.empty() && s->ours.is_open()) {
      chunk.clear();
      chunk.swap(s->up);  // up may grow while the write is under way
      s->writing = chunk.size();
      auto [ec, n] = co_await asio::async_write(s->ours, asio::buffer(chunk), as_tuple_awaitable);
      (void)n;
      s->writing = 0;
      s->changed.notify();
      if (ec) break;
      continue;
    }
    if (s->closed || !s->ours.is_open()) break;
    if (s->up_ended) {
      std::error_code ignored;
      s->ours.shutdown(tcp::socket::shutdown_send, ignored);
      break;
    }
    co_await s->changed.wait();
  }
}

std::shared_ptr<session_state> hub::join(const asio::any_io_executor& ex, const std::string& id,
                                         const transport_spec& t, const asio::ip::address& source, std::string& why) {
  if (auto it = sessions_.find(id); it != sessions_.end()) return it->second;
  if (ended_lately(id)) {
    why = "xhttp_session_ended";
    return nullptr;
  }
  auto& from_source = half_open_by_source_[source];
  if (half_open_ >= max_half_open || from_source >= max_half_open_per_source) {
    if (from_source == 0) half_open_by_source_.erase(source);
    why = "xhttp_too_many_sessions";
    return nullptr;
  }
  auto s = std::make_shared<session_state>(ex, id, t, source);
  if (!open_pair(*s, why)) return nullptr;
  ++from_source;
  ++half_open_;
  sessions_.emplace(id, s);
  asio::co_spawn(ex, uplink(s), asio::detached);
  asio::co_spawn(ex, reap(shared_from_this(), s, std::chrono::milliseconds(t.session_timeout_ms)), asio::detached);
  return s;
}

void hub::connected(const session_state& s) {
  if (s.download) return;
  if (auto it = half_open_by_source_.find(s.source); it != half_open_by_source_.end()) {
    if (--it->second == 0) half_open_by_source_.erase(it);
  }
  if (half_open_ > 0) --half_open_;
}

void hub::leave(const session_state& s) {
  const auto it = sessions_.find(s.id);
  if (it == sessions_.end() || it->second.get() != &s) return;
  if (!s.download) connected(s);
  sessions_.erase(it);
  ended_.insert(s.id);
  ended_order_.push_back(s.id);
  if (ended_order_.size() > max_ended) {
    ended_.erase(ended_order_.front());
    ended_order_.pop_front();
  }
}

awaitable<void> hub::reap(std::shared_ptr<hub> self, std::weak_ptr<session_state> weak,
                          std::chrono::milliseconds after) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  timer.expires_after(after);
  auto [ec] = co_await timer.async_wait(as_tuple_awaitable);
  (void)ec;
  const auto s = weak.lock();
  if (!s || s->download) co_return;  // its GET's end takes it out of the hub
  self->leave(*s);
  if (s->closed) co_return;  // its streaming POST's connection went first
  s->fail("xhttp_no_download");
  std::error_code ignored;
  s->theirs.close(ignored);
  if (self->reject) self->reject(*s, "xhttp_no_download", "no GET for the session within session_timeout_ms");
}

}  // namespace vlessbench::xhttp
