#include "target/probe_runs.hpp"

#include <openssl/hmac.h>
#include <openssl/mem.h>
#include <openssl/rand.h>

#include <charconv>
#include <stdexcept>

namespace vlessbench::target {
namespace {

std::string hex(const std::uint8_t* p, std::size_t n) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(n * 2);
  for (std::size_t i = 0; i < n; ++i) {
    out += digits[p[i] >> 4];
    out += digits[p[i] & 15];
  }
  return out;
}

std::int64_t ticks(probe_runs::clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

}  // namespace

probe_runs::probe_runs() : key_(32, '\0') {
  if (RAND_bytes(reinterpret_cast<std::uint8_t*>(key_.data()), key_.size()) != 1)
    throw std::runtime_error("probe token key: RAND_bytes failed");
}

std::string probe_runs::mac(std::string_view run, std::string_view client, std::int64_t expiry) const {
  const std::string msg = std::string(run) + "|" + std::string(client) + "|" + std::to_string(expiry);
  std::uint8_t out[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  HMAC(EVP_sha256(), key_.data(), key_.size(), reinterpret_cast<const std::uint8_t*>(msg.data()), msg.size(), out,
       &len);
  return hex(out, len);
}

void probe_runs::purge(clock::time_point now) {
  for (auto it = used_.begin(); it != used_.end();) it = it->second <= now ? used_.erase(it) : std::next(it);
  while (!run_order_.empty()) {
    auto it = runs_.find(run_order_.front());
    if (it != runs_.end() && it->second.expiry > now && runs_.size() < max_runs) break;
    if (it != runs_.end()) runs_.erase(it);
    run_order_.pop_front();
  }
}

probe_runs::issued probe_runs::issue(std::string_view client, clock::time_point now) {
  static constexpr char chars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::uint8_t bytes[16];
  if (RAND_bytes(bytes, sizeof bytes) != 1) throw std::runtime_error("probe run id: RAND_bytes failed");
  issued out;
  for (auto b : bytes) out.run += chars[b % 36];
  const auto expiry = now + ttl;
  out.token = std::to_string(ticks(expiry)) + "." + mac(out.run, client, ticks(expiry));
  const std::lock_guard lock(mutex_);
  purge(now);
  while (runs_.size() >= max_runs && !run_order_.empty()) {  // a page-load flood drops the oldest notes
    runs_.erase(run_order_.front());
    run_order_.pop_front();
  }
  runs_.emplace(out.run, run_notes{expiry, {}});
  run_order_.push_back(out.run);
  return out;
}

std::string_view probe_runs::redeem(std::string_view run, std::string_view client, std::string_view token,
                                    clock::time_point now) {
  if (token.empty()) return "no_token";
  const auto dot = token.find('.');
  std::int64_t expiry = 0;
  if (dot == std::string_view::npos ||
      std::from_chars(token.data(), token.data() + dot, expiry).ptr != token.data() + dot)
    return "bad_token";
  const std::string want = mac(run, client, expiry);
  const auto given = token.substr(dot + 1);
  if (given.size() != want.size() || CRYPTO_memcmp(given.data(), want.data(), want.size()) != 0) return "bad_token";
  if (expiry <= ticks(now)) return "expired_token";
  const std::lock_guard lock(mutex_);
  purge(now);
  if (used_.contains(token)) return "used_token";
  if (used_.size() >= max_used) return "tokens_busy";
  used_.emplace(std::string(token), clock::time_point(std::chrono::milliseconds(expiry)));
  return "";
}

void probe_runs::observe(std::string_view run, std::uint64_t seq, const seen& s, clock::time_point now) {
  const std::lock_guard lock(mutex_);
  auto it = runs_.find(run);
  if (it == runs_.end() || it->second.expiry <= now) return;
  auto& samples = it->second.samples;
  if (samples.size() >= max_samples && !samples.contains(seq)) return;
  samples.insert_or_assign(seq, s);
}

std::size_t probe_runs::verify(probe_result& r) const {
  const std::lock_guard lock(mutex_);
  const auto it = runs_.find(r.run);
  std::size_t n = 0;
  for (auto& s : r.samples) {
    s.verified = false;
    if (it == runs_.end()) continue;
    const auto seen_it = it->second.samples.find(s.seq);
    if (seen_it == it->second.samples.end()) continue;
    const seen& w = seen_it->second;
    if (w.vless) {
      if (s.route != "vless" || s.session != w.session) continue;
      s.vless = w.vless_ms;
    } else if (s.route != "direct" || s.session) {
      continue;
    }
    s.verified = true;
    ++n;
  }
  return n;
}

}  // namespace vlessbench::target
