// libFuzzer target for the XTLS Vision padding parser (core/wire/vision.hpp). Invariants: the
// content never exceeds the input; fed whole or in pieces (the first byte picks the piece size)
// the content, the error and the state are the same; an error has a reason and sticks; the TLS
// filter reads any bytes without reading past them. Then the input, padded by the padder as
// writes, unpads to exactly itself.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/wire/vision.hpp"

using namespace vlessbench;

namespace {

const uuid_bytes user{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

struct outcome {
  std::string content;
  std::string_view error;
  vision::unpadder::state state;
};

outcome run(std::string in, std::size_t step) {
  vision::unpadder u(user);
  outcome o;
  for (std::size_t i = 0; i < in.size();) {
    const std::size_t k = std::min(step, in.size() - i);
    const auto r = u.feed(in.data() + i, k, in.data() + i);
    if (r.out > k) __builtin_trap();
    o.content.append(in.data() + i, r.out);
    if (!r.error.empty()) {
      o.error = r.error;
      break;
    }
    i += k;
  }
  o.state = u.where();
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t step = 1 + data[0] % 64;
  // The UUID in front, so most inputs reach the frames.
  std::string in(reinterpret_cast<const char*>(user.data()), user.size());
  in.append(reinterpret_cast<const char*>(data + 1), size - 1);
  const outcome whole = run(in, in.size());
  const outcome pieces = run(in, step);
  if (whole.content.size() > in.size()) __builtin_trap();
  if (whole.content != pieces.content || whole.error != pieces.error || whole.state != pieces.state) __builtin_trap();
  if (!whole.error.empty() && whole.state != vision::unpadder::state::failed) __builtin_trap();

  vision::tls_filter f;
  f.observe(std::string_view(reinterpret_cast<const char*>(data), size));

  // Round trip: the input as writes of step bytes, padded, then unpadded.
  vision::tls_filter wf;
  vision::padder p(user, data[0]);
  std::string wire;
  const std::string_view plain(reinterpret_cast<const char*>(data + 1), size - 1);
  for (std::size_t i = 0; i < plain.size(); i += step) p.pad(wf, plain.substr(i, step), wire);
  const outcome back = run(wire, step);
  if (!back.error.empty() || back.content != plain) __builtin_trap();
  return 0;
}
