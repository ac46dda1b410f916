#include "core/wire/vision.hpp"

#include <algorithm>
#include <cstring>

namespace vlessbench::vision {

namespace {

constexpr unsigned char handshake = 0x16, app_data = 0x17;
constexpr unsigned char client_hello = 0x01, server_hello = 0x02;
// supported_versions (43), length 2, TLS 1.3: how a TLS 1.3 ServerHello says what it chose.
constexpr std::string_view tls13_supported_versions("\x00\x2b\x00\x02\x03\x04", 6);
constexpr std::uint16_t tls_aes_128_ccm_8_sha256 = 0x1305;

unsigned char at(std::string_view s, std::size_t i) { return static_cast<unsigned char>(s[i]); }

bool starts_app_data(std::string_view s) {
  return s.size() >= 6 && at(s, 0) == app_data && at(s, 1) == 3 && at(s, 2) == 3;
}

}  // namespace

void tls_filter::observe(std::string_view packet) {
  if (packets_left <= 0) return;
  --packets_left;
  if (packet.size() >= 6) {
    if (at(packet, 0) == handshake && at(packet, 1) == 3 && at(packet, 2) == 3 && at(packet, 5) == server_hello) {
      server_hello_left = static_cast<std::int32_t>((at(packet, 3) << 8) | at(packet, 4)) + 5;
      tls12_or_above = true;
      is_tls = true;
      // record(5) handshake header(4) version(2) random(32): the session id's length at 43, the
      // cipher suite after the id.
      if (packet.size() >= 79 && server_hello_left >= 79) {
        const std::size_t sid = at(packet, 43);
        if (44 + sid + 2 <= packet.size())
          cipher = static_cast<std::uint16_t>((at(packet, 44 + sid) << 8) | at(packet, 45 + sid));
      }
    } else if (at(packet, 0) == handshake && at(packet, 1) == 3 && at(packet, 5) == client_hello) {
      is_tls = true;
    }
  }
  if (server_hello_left > 0) {
    const std::size_t end = std::min<std::size_t>(static_cast<std::size_t>(server_hello_left), packet.size());
    server_hello_left -= static_cast<std::int32_t>(std::min<std::size_t>(packet.size(), 1 << 20));
    if (packet.substr(0, end).find(tls13_supported_versions) != std::string_view::npos) {
      tls13 = true;
      // TLS 1.3 ciphers are 0x1301..0x1305; CCM_8's short tag is the one Vision leaves encrypted.
      direct_ok = cipher >= 0x1301 && cipher < tls_aes_128_ccm_8_sha256;
      packets_left = 0;
    } else if (server_hello_left <= 0) {
      packets_left = 0;  // TLS 1.2: padded to the first application data, never direct
    }
  }
}

unpadder::result unpadder::feed(const char* in, std::size_t n, char* out) {
  result r;
  std::size_t i = 0;
  auto fail = [&](std::string_view why) {
    state_ = state::failed;
    r.error = why;
    return r;
  };
  while (i < n) {
    switch (state_) {
      case state::failed: return fail("vision_failed");
      case state::plain:
      case state::direct:
        // After end or direct the rest is the stream itself (a sender that wrote past its last
        // frame in the same read, or the raw bytes handed over after direct).
        std::memmove(out + r.out, in + i, n - i);
        r.out += n - i;
        return r;
      case state::uuid: {
        const std::size_t k = std::min(n - i, uuid_.size() - pos_);
        if (std::memcmp(in + i, uuid_.data() + pos_, k) != 0) return fail("vision_bad_uuid");
        pos_ += k;
        i += k;
        padding_total_ += k;
        if (pos_ == uuid_.size()) {
          pos_ = 0;
          state_ = state::header;
        }
        break;
      }
      case state::header: {
        const std::size_t k = std::min(n - i, frame_header_size - pos_);
        std::memcpy(header_ + pos_, in + i, k);
        pos_ += k;
        i += k;
        padding_total_ += k;
        if (pos_ < frame_header_size) break;
        pos_ = 0;
        if (header_[0] > static_cast<std::uint8_t>(command::pad_direct)) return fail("vision_bad_command");
        content_left_ = (static_cast<std::size_t>(header_[1]) << 8) | header_[2];
        padding_left_ = (static_cast<std::size_t>(header_[3]) << 8) | header_[4];
        if (padding_left_ > max_padding) return fail("vision_bad_padding");
        if (++frames_ > max_padded_frames) return fail("vision_padding_unended");
        // A frame without content goes on to its padding now: an empty last frame (end or
        // direct, zero padding) takes effect with its header, not with the byte after it.
        state_ = content_left_ > 0 ? state::content : state::padding;
        break;
      }
      case state::content: {
        const std::size_t k = std::min(n - i, content_left_);
        std::memmove(out + r.out, in + i, k);
        r.out += k;
        i += k;
        content_left_ -= k;
        if (content_left_ == 0) state_ = state::padding;
        break;
      }
      case state::padding: {
        const std::size_t k = std::min(n - i, padding_left_);
        i += k;
        padding_left_ -= k;
        padding_total_ += k;
        break;
      }
    }
    if (state_ == state::padding && padding_left_ == 0) {
      switch (static_cast<command>(header_[0])) {
        case command::pad_continue: state_ = state::header; break;
        case command::pad_end: state_ = state::plain; break;
        case command::pad_direct: state_ = state::direct; break;
      }
    }
  }
  return r;
}

void padder::frame(std::string& out, command c, std::string_view content, bool long_padding) {
  std::size_t pad;
  if (content.size() < 900 && long_padding)
    pad = std::uniform_int_distribution<std::size_t>(0, 499)(rng_) + 900 - content.size();
  else
    pad = std::uniform_int_distribution<std::size_t>(0, 255)(rng_);
  pad = std::min(pad, max_padding > content.size() ? max_padding - content.size() : 0);
  if (!uuid_sent_) {
    out.append(reinterpret_cast<const char*>(uuid_.data()), uuid_.size());
    uuid_sent_ = true;
    padding_total_ += uuid_.size();
  }
  const char head[frame_header_size] = {static_cast<char>(c), static_cast<char>(content.size() >> 8),
                                        static_cast<char>(content.size() & 0xff), static_cast<char>(pad >> 8),
                                        static_cast<char>(pad & 0xff)};
  out.append(head, sizeof head);
  out.append(content);
  out.append(pad, '\0');
  padding_total_ += frame_header_size + pad;
}

padder::written padder::pad(tls_filter& f, std::string_view content, std::string& out) {
  written w;
  f.observe(content);
  if (!padding_) {
    out.append(content);
    return w;
  }
  if (content.empty()) {
    frame(out, command::pad_continue, {}, true);  // long: hides the request header's length
    return w;
  }
  bool long_padding = f.is_tls;
  const command last_word = f.direct_ok ? command::pad_direct : command::pad_end;
  command said = command::pad_continue;
  while (!content.empty()) {
    const std::string_view piece = content.substr(0, max_chunk);
    content.remove_prefix(piece.size());
    const bool last = content.empty();
    if (f.is_tls && starts_app_data(piece)) {
      // The first application data: the handshake is over, padding ends with this write.
      said = last ? last_word : command::pad_continue;
      frame(out, said, piece, true);
      padding_ = false;
      long_padding = false;
      continue;
    }
    if (!f.tls12_or_above && f.packets_left <= 1) {
      // No ServerHello within the detection's packets: not TLS (or not one Vision can tell).
      padding_ = false;
      said = command::pad_end;
      frame(out, said, piece, long_padding);
      out.append(content);
      break;
    }
    said = last && !padding_ ? last_word : command::pad_continue;
    frame(out, said, piece, long_padding);
  }
  w.direct = said == command::pad_direct;
  return w;
}

}  // namespace vlessbench::vision
