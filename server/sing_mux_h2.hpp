#pragma once
// sing-mux's h2mux on the gRPC transport's nghttp2 driver (server/transport/grpc_h2.hpp in its CONNECT mode):
// the HTTP/2 layer server/sing_mux_framing.hpp asks for (sing_mux::h2_framing), as events per stream.
// The driver's bounds hold as they do for gRPC: SETTINGS_MAX_CONCURRENT_STREAMS (here the session's
// max_mux_subs), manual flow control (a stream's window opens as the engine takes its bytes), the PING /
// SETTINGS / CONTINUATION flood limits and the RST_STREAM rate (GOAWAY ENHANCE_YOUR_CALM).
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "server/sing_mux_framing.hpp"
#include "server/transport/grpc_h2.hpp"

namespace vlessbench::vless_server {

class sing_mux_h2 final : public sing_mux::h2_framing {
 public:
  explicit sing_mux_h2(std::uint32_t max_streams);
  static grpc::h2_limits limits(std::uint32_t max_streams);

  std::string_view feed(std::string_view in, std::vector<event>& events) override;
  void send(std::uint32_t stream, std::string_view data) override;
  void finish(std::uint32_t stream) override;
  void consumed(std::uint32_t stream, std::size_t n) override;
  std::size_t held() const override { return h2_.buffered_out(); }
  std::string_view drain(std::string& to_client) override;
  std::vector<rejection> take_rejected() override;

 private:
  struct open_stream {
    std::shared_ptr<grpc::h2_stream> s;
    bool ended = false;  // its end or reset event went out
  };
  grpc::h2_stream* find(std::uint32_t stream);

  grpc::h2_server h2_;
  std::map<std::uint32_t, open_stream> streams_;  // opened, until nghttp2 closes them
  std::vector<rejection> rejected_;
};

}  // namespace vlessbench::vless_server
