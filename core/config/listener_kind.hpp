#pragma once
#include <string_view>

namespace vlessbench {

// What a listener serves. The names (to_string) are what logs and reload messages print.
enum class listener_kind { vless, target, https, banner };
constexpr std::string_view to_string(listener_kind k) {
  switch (k) {
    case listener_kind::vless: return "vless";
    case listener_kind::target: return "target";
    case listener_kind::https: return "https";
    case listener_kind::banner: return "banner";
  }
  return "?";
}

}  // namespace vlessbench
