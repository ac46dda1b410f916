#include "core/wire/ws_frame.hpp"

#include <algorithm>
#include <cstring>

namespace vlessbench::ws {

namespace {

bool is_control(std::uint8_t op) { return (op & 0x08) != 0; }

bool known_opcode(std::uint8_t op) { return op == 0 || op == 1 || op == 2 || op == 8 || op == 9 || op == 10; }

parse_result<frame_header> invalid(std::string_view why) {
  parse_result<frame_header> r;
  r.status = parse_status::invalid;
  r.reason = why;
  return r;
}

}  // namespace

parse_result<frame_header> parse_frame_header(std::string_view in, const frame_rules& rules) {
  parse_result<frame_header> r;
  if (in.size() < 2) return r;
  const auto b0 = static_cast<std::uint8_t>(in[0]);
  const auto b1 = static_cast<std::uint8_t>(in[1]);
  if ((b0 & 0x70) != 0) return invalid("rsv_bits_set");
  const std::uint8_t op = b0 & 0x0f;
  if (!known_opcode(op)) return invalid("unknown_opcode");
  const bool fin = (b0 & 0x80) != 0;
  const bool masked = (b1 & 0x80) != 0;
  if (rules.masked && !masked) return invalid("unmasked_client_frame");
  if (!rules.masked && masked) return invalid("masked_server_frame");
  const std::uint8_t len7 = b1 & 0x7f;
  if (is_control(op)) {
    if (!fin) return invalid("control_frame_fragmented");
    if (len7 > max_control_payload) return invalid("control_frame_too_long");
  }
  std::size_t need = 2 + (len7 == 126 ? 2 : len7 == 127 ? 8 : 0) + (masked ? 4 : 0);
  if (in.size() < need) return r;
  std::uint64_t length = len7;
  std::size_t pos = 2;
  if (len7 == 126) {
    length = static_cast<std::uint64_t>(static_cast<std::uint8_t>(in[2])) << 8 | static_cast<std::uint8_t>(in[3]);
    pos = 4;
    if (length < 126) return invalid("non_minimal_length");
  } else if (len7 == 127) {
    length = 0;
    for (std::size_t i = 0; i < 8; ++i) length = length << 8 | static_cast<std::uint8_t>(in[2 + i]);
    pos = 10;
    if ((length >> 63) != 0) return invalid("length_msb_set");
    if (length <= 0xffff) return invalid("non_minimal_length");
  }
  if (length > rules.max_frame) return invalid("frame_too_large");
  r.value.fin = fin;
  r.value.op = static_cast<opcode>(op);
  r.value.masked = masked;
  r.value.length = length;
  if (masked) std::memcpy(r.value.mask.data(), in.data() + pos, 4);
  r.status = parse_status::complete;
  r.consumed = need;
  return r;
}

std::size_t encode_frame_header(char* out, opcode op, bool fin, std::uint64_t length, const mask_key* mask) {
  out[0] = static_cast<char>((fin ? 0x80 : 0) | static_cast<std::uint8_t>(op));
  const char m = mask != nullptr ? static_cast<char>(0x80) : 0;
  std::size_t n = 2;
  if (length < 126) {
    out[1] = static_cast<char>(m | static_cast<char>(length));
  } else if (length <= 0xffff) {
    out[1] = static_cast<char>(m | 126);
    out[2] = static_cast<char>(length >> 8);
    out[3] = static_cast<char>(length);
    n = 4;
  } else {
    out[1] = static_cast<char>(m | 127);
    for (std::size_t i = 0; i < 8; ++i) out[2 + i] = static_cast<char>(length >> (8 * (7 - i)));
    n = 10;
  }
  if (mask != nullptr) {
    std::memcpy(out + n, mask->data(), 4);
    n += 4;
  }
  return n;
}

void apply_mask(char* data, std::size_t n, const mask_key& key, std::uint64_t offset) {
  // Eight bytes at a time: the relay unmasks every byte a client sends.
  std::size_t i = 0;
  const auto rot = static_cast<std::size_t>(offset & 3);
  std::uint8_t k[8];
  for (std::size_t j = 0; j < 8; ++j) k[j] = key[(rot + j) & 3];
  std::uint64_t k64;
  std::memcpy(&k64, k, 8);
  for (; i + 8 <= n; i += 8) {
    std::uint64_t v;
    std::memcpy(&v, data + i, 8);
    v ^= k64;
    std::memcpy(data + i, &v, 8);
  }
  for (; i < n; ++i) data[i] = static_cast<char>(data[i] ^ static_cast<char>(k[i & 7]));
}

std::uint16_t close_code(std::string_view payload) {
  if (payload.size() < 2) return 1005;
  return static_cast<std::uint16_t>(static_cast<std::uint8_t>(payload[0]) << 8 | static_cast<std::uint8_t>(payload[1]));
}

frame_decoder::step frame_decoder::decode(char* data, std::size_t n) {
  step out;
  if (failed_) {
    out.reason = "decoder_failed";
    return out;
  }
  auto fail = [&](std::string_view why) {
    failed_ = true;
    out.reason = why;
    return out;
  };
  std::size_t pos = 0;
  while (pos < n) {
    if (!in_payload_) {
      // Header bytes: from the held partial header, else straight from data.
      const std::size_t take = std::min(max_header_bytes - head_used_, n - pos);
      std::memcpy(head_.data() + head_used_, data + pos, take);
      const auto parsed = parse_frame_header(std::string_view(head_.data(), head_used_ + take), rules_);
      if (parsed.invalid()) return fail(parsed.reason);
      if (parsed.need_more()) {
        head_used_ += take;
        pos += take;
        continue;
      }
      pos += parsed.consumed - head_used_;
      head_used_ = 0;
      cur_ = parsed.value;
      done_ = 0;
      const bool control = is_control(static_cast<std::uint8_t>(cur_.op));
      if (close_received_) return fail("frame_after_close");
      if (!control) {
        if (cur_.op == opcode::text) return fail("text_frame");
        if (cur_.op == opcode::continuation && !in_message_) return fail("unexpected_continuation");
        if (cur_.op == opcode::binary && in_message_) return fail("interleaved_message");
        in_message_ = !cur_.fin;
      }
      control_.clear();
      in_payload_ = true;
    }
    const std::uint64_t left = cur_.length - done_;
    const auto take = static_cast<std::size_t>(std::min<std::uint64_t>(left, n - pos));
    if (cur_.masked) apply_mask(data + pos, take, cur_.mask, done_);
    if (is_control(static_cast<std::uint8_t>(cur_.op))) {
      control_.append(data + pos, take);
    } else {
      if (out.payload != pos) std::memmove(data + out.payload, data + pos, take);
      out.payload += take;
    }
    pos += take;
    done_ += take;
    if (done_ == cur_.length) {
      in_payload_ = false;
      if (is_control(static_cast<std::uint8_t>(cur_.op))) {
        if (cur_.op == opcode::close) {
          if (control_.size() == 1) return fail("bad_close_payload");
          close_received_ = true;
        }
        controls_.push_back({cur_.op, std::move(control_)});
        control_.clear();
      }
    }
  }
  return out;
}

}  // namespace vlessbench::ws
