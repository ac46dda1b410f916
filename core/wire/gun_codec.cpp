#include "core/wire/gun_codec.hpp"

namespace vlessbench::gun {

namespace {

constexpr unsigned max_varint_bytes = 10;
constexpr std::uint64_t max_field_number = (1u << 29) - 1;

std::size_t put_varint(char* out, std::uint64_t v) {
  std::size_t n = 0;
  while (v >= 0x80) {
    out[n++] = static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out[n++] = static_cast<char>(v);
  return n;
}

std::size_t varint_size(std::uint64_t v) {
  std::size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

void put_prefix(char* out, std::size_t length) {
  out[0] = 0;
  out[1] = static_cast<char>((length >> 24) & 0xff);
  out[2] = static_cast<char>((length >> 16) & 0xff);
  out[3] = static_cast<char>((length >> 8) & 0xff);
  out[4] = static_cast<char>(length & 0xff);
}

// The prefix's verdict: the message length, or a reason.
std::string_view check_prefix(const unsigned char* p, std::size_t max_message, std::uint64_t& length) {
  if (p[0] == 1) return "compressed_message";
  if (p[0] != 0) return "bad_compressed_flag";
  length = (std::uint64_t{p[1]} << 24) | (std::uint64_t{p[2]} << 16) | (std::uint64_t{p[3]} << 8) | p[4];
  if (length > max_message) return "message_too_large";
  return {};
}

// A tag's verdict: what follows it (0 varint, 1 eight bytes, 2 a length, 5 four
// bytes), or a reason.
std::string_view check_tag(std::uint64_t tag, message_kind kind, bool data_seen) {
  const std::uint64_t field = tag >> 3;
  const unsigned wire = tag & 7;
  if (field == 0 || field > max_field_number) return "bad_field_number";
  if (wire == 3 || wire == 4) return "group_wire_type";
  if (wire > 5) return "bad_wire_type";
  if (field == 1 && wire != 2) return "data_wrong_wire_type";
  if (field == 1 && kind == message_kind::hunk && data_seen) return "hunk_data_repeated";
  return {};
}

// Reads a varint from in at pos, not past end. False: it runs past end (reason
// empty) or is too long.
bool read_varint(std::string_view in, std::size_t& pos, std::size_t end, std::uint64_t& v, std::string_view& reason) {
  v = 0;
  for (unsigned i = 0; i < max_varint_bytes; ++i) {
    if (pos >= end) {
      reason = "field_overruns_message";
      return false;
    }
    const auto b = static_cast<unsigned char>(in[pos++]);
    v |= std::uint64_t{b & 0x7fu} << (7 * i);
    if ((b & 0x80) == 0) return true;
  }
  reason = "varint_too_long";
  return false;
}

}  // namespace

std::size_t encode_hunk_header(char* out, std::size_t data_len) {
  if (data_len == 0) {
    put_prefix(out, 0);
    return prefix_bytes;
  }
  const std::size_t body = 1 + varint_size(data_len) + data_len;
  put_prefix(out, body);
  out[prefix_bytes] = 0x0a;
  return prefix_bytes + 1 + put_varint(out + prefix_bytes + 1, data_len);
}

std::string encode_hunk(std::string_view data) {
  char head[max_header_bytes];
  const std::size_t n = encode_hunk_header(head, data.size());
  std::string out(head, n);
  out.append(data);
  return out;
}

std::string encode_multi_hunk(const std::vector<std::string_view>& chunks) {
  std::string body;
  char len[max_varint_bytes];
  for (auto c : chunks) {
    body += '\x0a';
    body.append(len, put_varint(len, c.size()));
    body.append(c);
  }
  std::string out(prefix_bytes, '\0');
  put_prefix(out.data(), body.size());
  return out + body;
}

parse_result<message> parse_message(std::string_view in, message_kind kind, std::size_t max_message) {
  parse_result<message> r;
  if (in.size() < prefix_bytes) return r;
  std::uint64_t length = 0;
  if (auto why = check_prefix(reinterpret_cast<const unsigned char*>(in.data()), max_message, length); !why.empty()) {
    r.status = parse_status::invalid;
    r.reason = why;
    return r;
  }
  if (in.size() - prefix_bytes < length) return r;
  const std::size_t end = prefix_bytes + length;
  std::size_t pos = prefix_bytes;
  bool data_seen = false;
  auto invalid = [&r](std::string_view why) {
    r.status = parse_status::invalid;
    r.reason = why;
    r.value.chunks.clear();
    return r;
  };
  while (pos < end) {
    std::uint64_t tag = 0;
    std::string_view why;
    if (!read_varint(in, pos, end, tag, why)) return invalid(why);
    if (why = check_tag(tag, kind, data_seen); !why.empty()) return invalid(why);
    if (pos >= end) return invalid("field_overruns_message");
    std::uint64_t skip = 0;
    switch (tag & 7) {
      case 0: {
        std::uint64_t ignored = 0;
        if (!read_varint(in, pos, end, ignored, why)) return invalid(why);
        continue;
      }
      case 1: skip = 8; break;
      case 5: skip = 4; break;
      default:
        if (!read_varint(in, pos, end, skip, why)) return invalid(why);
        break;
    }
    if (skip > end - pos) return invalid("field_overruns_message");
    if (tag >> 3 == 1) {
      data_seen = true;
      r.value.chunks.push_back(in.substr(pos, skip));
    }
    pos += skip;
  }
  r.status = parse_status::complete;
  r.consumed = end;
  return r;
}

void stream_decoder::end_field() {
  if (left_ == 0) {
    ++messages_;
    state_ = state::prefix;
    prefix_used_ = 0;
  } else {
    state_ = state::tag;
  }
  varint_ = 0;
  varint_bytes_ = 0;
}

// Adds one byte (of the current message) to the varint being read.
std::string_view stream_decoder::take_varint(unsigned char byte, bool& done) {
  varint_ |= std::uint64_t{byte & 0x7fu} << (7 * varint_bytes_);
  ++varint_bytes_;
  --left_;
  done = (byte & 0x80) == 0;
  if (!done && varint_bytes_ == max_varint_bytes) return fail("varint_too_long");
  if (!done && left_ == 0) return fail("field_overruns_message");
  return {};
}

// A field's tag is read: its number and wire type decide what its bytes are.
std::string_view stream_decoder::start_field(std::uint64_t tag) {
  if (auto why = check_tag(tag, kind_, data_seen_); !why.empty()) return fail(why);
  if (left_ == 0) return fail("field_overruns_message");
  field_ = static_cast<std::uint32_t>(tag >> 3);
  switch (tag & 7) {
    case 0: state_ = state::skip_varint; break;
    case 1:
      field_left_ = 8;
      state_ = state::skip_bytes;
      break;
    case 5:
      field_left_ = 4;
      state_ = state::skip_bytes;
      break;
    default: state_ = state::length; break;
  }
  if (field_left_ > left_ && state_ == state::skip_bytes) return fail("field_overruns_message");
  return {};
}

stream_decoder::step stream_decoder::decode(std::string_view in, std::string& out) {
  step s;
  if (failed()) {
    s.reason = failure_;
    return s;
  }
  std::size_t pos = 0;
  auto stop = [&](std::string_view why) {
    s.consumed = pos;
    s.reason = why;
    return s;
  };
  while (pos < in.size()) {
    const auto byte = static_cast<unsigned char>(in[pos]);
    switch (state_) {
      case state::prefix: {
        prefix_[prefix_used_++] = byte;
        ++pos;
        if (prefix_used_ < prefix_bytes) break;
        if (auto why = check_prefix(prefix_.data(), max_message_, left_); !why.empty()) return stop(fail(why));
        data_seen_ = false;
        end_field();
        break;
      }
      case state::tag: {
        bool done = false;
        ++pos;
        if (auto why = take_varint(byte, done); !why.empty()) return stop(why);
        if (!done) break;
        const std::uint64_t tag = varint_;
        varint_ = 0;
        varint_bytes_ = 0;
        if (auto why = start_field(tag); !why.empty()) return stop(why);
        break;
      }
      case state::skip_varint:
      case state::length: {
        bool done = false;
        ++pos;
        if (auto why = take_varint(byte, done); !why.empty()) return stop(why);
        if (!done) break;
        if (state_ == state::skip_varint) {
          end_field();
          break;
        }
        field_left_ = varint_;
        varint_ = 0;
        varint_bytes_ = 0;
        if (field_left_ > left_) return stop(fail("field_overruns_message"));
        if (field_ == 1) data_seen_ = true;
        state_ = field_ == 1 ? state::data : state::skip_bytes;
        if (field_left_ == 0) end_field();
        break;
      }
      case state::data:
      case state::skip_bytes: {
        const std::size_t k = static_cast<std::size_t>(std::min<std::uint64_t>(field_left_, in.size() - pos));
        if (state_ == state::data) out.append(in.data() + pos, k);
        pos += k;
        field_left_ -= k;
        left_ -= k;
        if (field_left_ == 0) end_field();
        break;
      }
    }
  }
  s.consumed = pos;
  return s;
}

}  // namespace vlessbench::gun
