#pragma once
// Applies a tcp_policy to a socket: TCP_NODELAY once, TCP_QUICKACK after accept/connect and again
// after every read (Linux clears it; see tcp(7)). Non-Linux builds keep only TCP_NODELAY.
#include <system_error>

#include "config.hpp"

namespace vlessbench {

// Returns the first error of setsockopt (the socket stays usable; callers log it).
std::error_code apply_on_open(int fd, const tcp_policy& p);
// Called after each completed read; a no-op for quickack = kernel.
void apply_after_read(int fd, const tcp_policy& p);

}  // namespace vlessbench
