#include "runner/sample.hpp"

namespace vlessbench::runner {

std::string_view to_string(sample_mode m) { return m == sample_mode::new_connection ? "new" : "reuse"; }

bool is_route_mismatch(path_kind kind, route_kind route) {
  // A port forward or a TLS terminator may lead through VLESS (a client's dokodemo-door) or not
  // (socat, HAProxy): not checked.
  if (route == route_kind::unknown || kind == path_kind::forward || kind == path_kind::tls) return false;
  return kind == path_kind::direct ? route == route_kind::vless : route == route_kind::direct;
}

}  // namespace vlessbench::runner
