#pragma once
// One HTTP/2 header field as nghttp2 takes it (the gRPC client in core/client/gun_client.cpp and the
// server in server/transport/grpc_h2.cpp). nghttp2 copies names and values when the frame is
// submitted, so the views need only outlive the submit call.
#include <nghttp2/nghttp2.h>

#include <cstdint>
#include <string_view>

namespace vlessbench::h2 {

inline nghttp2_nv nv(std::string_view name, std::string_view value) {
  return {reinterpret_cast<std::uint8_t*>(const_cast<char*>(name.data())),
          reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data())), name.size(), value.size(),
          NGHTTP2_NV_FLAG_NONE};
}

}  // namespace vlessbench::h2
