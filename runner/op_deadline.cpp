#include "runner/op_deadline.hpp"

#include "core/net/tls.hpp"

namespace vlessbench::runner {

std::string op_deadline::describe(const std::error_code& ec) const {
  if (timed_out_) return std::string(phase_) + ": timeout after " + std::to_string(timeout_.count()) + " ms";
  if (ec == asio::error::eof || ec == asio::ssl::error::stream_truncated)
    return std::string(phase_) + ": connection closed by peer";
  return std::string(phase_) + ": " + ec.message();
}

}  // namespace vlessbench::runner
