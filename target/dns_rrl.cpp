#include "target/dns_rrl.hpp"

#include <algorithm>
#include <vector>

namespace vlessbench::target {

namespace {
asio::ip::address plain(const asio::ip::address& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped()) return asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6());
  return a;
}
constexpr std::size_t v4_prefix_bytes = 3;  // /24
constexpr std::size_t v6_prefix_bytes = 7;  // /56
}  // namespace

response_rate_limiter::key response_rate_limiter::key_of(const asio::ip::address& source) {
  key k{};
  const auto a = plain(source);
  if (a.is_v4()) {
    const auto b = a.to_v4().to_bytes();
    k[0] = 4;
    std::copy_n(b.begin(), v4_prefix_bytes, k.begin() + 1);
  } else {
    const auto b = a.to_v6().to_bytes();
    k[0] = 6;
    std::copy_n(b.begin(), v6_prefix_bytes, k.begin() + 1);
  }
  return k;
}

std::string response_rate_limiter::prefix_text(const asio::ip::address& source) {
  const auto a = plain(source);
  if (a.is_v4()) {
    auto b = a.to_v4().to_bytes();
    std::fill(b.begin() + v4_prefix_bytes, b.end(), 0);
    return asio::ip::address_v4(b).to_string() + "/24";
  }
  auto b = a.to_v6().to_bytes();
  std::fill(b.begin() + v6_prefix_bytes, b.end(), 0);
  return asio::ip::address_v6(b).to_string() + "/56";
}

void response_rate_limiter::make_room(clock::time_point now, const rrl_settings& s) {
  // First the accounts whose bucket has refilled (forgetting them changes nothing), then, if a
  // flood of forged prefixes keeps the table full, the quarter idle longest.
  std::erase_if(accounts_, [&](const auto& kv) { return now - kv.second.last >= s.window; });
  if (accounts_.size() < max_prefixes) return;
  std::vector<std::pair<clock::time_point, key>> by_age;
  by_age.reserve(accounts_.size());
  for (const auto& [k, a] : accounts_) by_age.emplace_back(a.last, k);
  const auto cut = by_age.begin() + static_cast<std::ptrdiff_t>(by_age.size() / 4);
  std::nth_element(by_age.begin(), cut, by_age.end());
  for (auto it = by_age.begin(); it != cut; ++it) accounts_.erase(it->second);
}

rrl_action response_rate_limiter::check(const asio::ip::address& source, const rrl_settings& s, clock::time_point now) {
  if (s.responses_per_second == 0) return rrl_action::answer;
  const double rate = s.responses_per_second;
  const double burst = std::max(1.0, rate * std::chrono::duration<double>(s.window).count());
  const key k = key_of(source);
  auto it = accounts_.find(k);
  if (it == accounts_.end()) {
    if (accounts_.size() >= max_prefixes) make_room(now, s);
    it = accounts_.emplace(k, account{burst, now, 0}).first;
  } else if (now > it->second.last) {
    const double seconds = std::chrono::duration<double>(now - it->second.last).count();
    it->second.credit = std::min(burst, it->second.credit + seconds * rate);
    it->second.last = now;
  }
  account& a = it->second;
  a.credit = std::min(a.credit, burst);  // a reload that lowered the limit
  if (a.credit >= 1.0) {
    a.credit -= 1.0;
    return rrl_action::answer;
  }
  ++a.limited;
  if (s.slip != 0 && a.limited % s.slip == 0) return rrl_action::slip;
  return rrl_action::drop;
}

}  // namespace vlessbench::target
