#include "server/mux_subs.hpp"

namespace vlessbench::mux {

std::string_view to_string(action a) {
  switch (a) {
    case action::open: return "open";
    case action::deliver: return "deliver";
    case action::end: return "end";
    case action::ignore: return "ignore";
    case action::refuse: return "refuse";
    case action::kill: return "kill";
    case action::stray: return "stray";
  }
  return "unknown";
}

const sub_state* sub_table::find(std::uint16_t id) const {
  const auto it = live_.find(id);
  return it == live_.end() ? nullptr : &it->second;
}

void sub_table::cancel_open(std::uint16_t id) {
  const auto it = live_.find(id);
  if (it == live_.end() || it->second.sub != opened_) return;
  live_.erase(it);
  --opened_;
  seen_[id] = seen_before_open_;
}

decision sub_table::on_frame(const frame& f) {
  const auto it = live_.find(f.id);
  switch (f.st) {
    case status::keep_alive: return {};
    case status::new_sub: {
      if (it != live_.end()) {
        const std::uint32_t sub = it->second.sub;
        live_.erase(it);
        return {.act = action::kill, .sub = sub, .reason = "duplicate_new"};
      }
      // parse_mux_frame guarantees a New's target.
      if (f.dest && f.dest->type == address_type::domain && f.dest->address == mux_cool_domain)
        return {.act = action::refuse, .reason = "mux_in_mux"};
      if (live_.size() >= max_live_) return {.act = action::refuse, .reason = "too_many_subs"};
      const sub_state s{.sub = ++opened_, .net = f.dest ? f.dest->net : network::tcp, .xudp = f.global_id.has_value()};
      live_.emplace(f.id, s);
      seen_before_open_ = seen_[f.id];
      seen_[f.id] = true;
      return {.act = action::open, .sub = s.sub};
    }
    case status::keep: {
      if (it == live_.end()) return seen_[f.id] ? decision{} : decision{.act = action::stray, .reason = "unknown_sub"};
      const sub_state s = it->second;
      std::string_view broken;
      if (f.dest && s.net == network::tcp) broken = "address_on_tcp_keep";
      if (!f.dest && s.xudp && f.has_data()) broken = "xudp_missing_address";
      if (!broken.empty()) {
        live_.erase(it);
        return {.act = action::kill, .sub = s.sub, .reason = broken};
      }
      return {.act = action::deliver, .sub = s.sub};
    }
    case status::end: {
      if (it == live_.end()) return seen_[f.id] ? decision{} : decision{.act = action::stray, .reason = "unknown_sub"};
      const std::uint32_t sub = it->second.sub;
      live_.erase(it);
      return {.act = action::end, .sub = sub};
    }
  }
  return {};
}

}  // namespace vlessbench::mux
