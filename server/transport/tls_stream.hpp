#pragma once
// The VLESS listeners' TLS stream: BoringSSL driven directly over the client socket, in place of
// asio::ssl::stream. asio::ssl keeps two 17 KiB buffers per stream plus a BIO pair (another two),
// touched at construction and held for the stream's life: ~70 KiB per session even when idle,
// and one extra copy of every record each way. Here BoringSSL reads and writes the socket through
// a small BIO: its own buffers are released whenever empty (BoringSSL's default), and the read
// side's coalescing buffer (one recv for several records; BoringSSL alone would make two recv
// calls per record, header then body) comes from a pool and goes back as soon as it is drained.
// An idle session holds no buffer at all. A read_now() pulls from the socket no more than its
// caller's room takes in records (read_ahead_for), and release_read_ahead() moves the few bytes
// left over into a buffer of their size: a relay blocked on its upstream write holds its one
// block, not a second one of ciphertext it read ahead (issue 23 item 10). The listener's
// tcp_policy still runs after every read of the socket (apply_after_read in the BIO), handshake
// reads included.
#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

#include <sys/socket.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <spdlog/spdlog.h>

#include "server/buffer_pool.hpp"
#include "core/net/policy_stream.hpp"
#include "core/net/tls.hpp"
#include "server/transport/reality.hpp"
#include "server/transport/transport.hpp"

namespace vlessbench {

// Raw TLS: the VLESS stream is the TLS plaintext (transport = "tls", the default).
class tls_stream {
 public:
  using executor_type = tcp::socket::executor_type;
  using next_layer_type = policy_stream;
  static constexpr transport::abilities can{};  // the byte stream only

  tls_stream(policy_stream next, asio::ssl::context& ctx) : next_(std::move(next)) {
    ssl_ = SSL_new(ctx.native_handle());
    BIO* bio = BIO_new(method());
    if (!ssl_ || !bio) throw std::runtime_error("tls_stream: out of memory");
    BIO_set_data(bio, this);
    BIO_set_init(bio, 1);
    SSL_set_bio(ssl_, bio, bio);
    SSL_set_accept_state(ssl_);
    std::error_code ignored;
    next_.socket().native_non_blocking(true, ignored);
  }
  tls_stream(const tls_stream&) = delete;  // the BIO points at this object
  tls_stream& operator=(const tls_stream&) = delete;
  ~tls_stream() { SSL_free(ssl_); }

  executor_type get_executor() { return next_.get_executor(); }
  policy_stream& next_layer() { return next_; }
  tcp::socket& socket() { return next_.socket(); }
  SSL* native_handle() { return ssl_; }

  // tls_handshake_failed after a failed open(); TLS errors later are the session's to name.
  std::optional<std::string_view> failure() const { return failure_; }
  transport::facts facts() const {
    transport::facts f{to_string(transport_kind::tls), tls::version_name(ssl_),  tls::cipher_name(ssl_),
                       tls::sni_received(ssl_),        tls::alpn_selected(ssl_), tls::ja4_received(ssl_)};
    f.groups = tls::groups_received(ssl_);
    f.key_shares = tls::key_shares_received(ssl_);
    if (refused_hello_) {  // REALITY relayed it: BoringSSL never saw it
      f.ja4 = refused_hello_->ja4;
      f.groups = refused_hello_->groups;
      f.key_shares = refused_hello_->key_shares;
      f.fallback = refused_hello_->fallback;
    }
    return f;
  }

  template <class Token>
  auto async_handshake(asio::ssl::stream_base::handshake_type, Token&& token) {
    return run<false>([](SSL* s) { return SSL_do_handshake(s); }, std::forward<Token>(token));
  }

  // The transport's opening: the TLS handshake (server side); on a REALITY listener the
  // ClientHello is judged first (server/transport/reality.hpp).
  awaitable<std::error_code> open(const transport::open_clock& clock);

  template <class MutableBufferSequence, class Token>
  auto async_read_some(const MutableBufferSequence& buffers, Token&& token) {
    const asio::mutable_buffer b = first_buffer(buffers);
    return run<true>([b](SSL* s) { return SSL_read(s, b.data(), clamp(b.size())); }, std::forward<Token>(token));
  }

  template <class ConstBufferSequence, class Token>
  auto async_write_some(const ConstBufferSequence& buffers, Token&& token) {
    const asio::const_buffer b = first_buffer(buffers);
    // No partial writes: a retry after WANT_WRITE repeats the same call, as BoringSSL requires.
    return run<true>([b](SSL* s) { return SSL_write(s, b.data(), clamp(b.size())); }, std::forward<Token>(token));
  }

  // Sends close_notify and waits for the peer's (as asio::ssl::stream does); bounded by the caller.
  template <class Token>
  auto async_shutdown(Token&& token) {
    return run<false>(
        [](SSL* s) {
          int r = SSL_shutdown(s);
          if (r == 0) r = SSL_shutdown(s);
          return r == 0 ? 1 : r;
        },
        std::forward<Token>(token));
  }

  // Completes when a read would make progress without holding a buffer while waiting: decrypted
  // or received bytes are buffered already, or the socket is readable.
  template <class Token>
  auto async_wait_readable(Token&& token) {
    return asio::async_compose<Token, void(std::error_code)>(
        [this, started = false](auto& self, std::error_code ec = {}) mutable {
          if (!started && buffered()) {
            started = true;
            asio::post(next_.get_executor(), [s = std::move(self)]() mutable { s.complete(std::error_code{}); });
            return;
          }
          if (!started) {
            started = true;
            next_.socket().async_wait(tcp::socket::wait_read, std::move(self));
            return;
          }
          self.complete(ec);
        },
        token, next_.socket());
  }

  // One SSL_read without waiting: bytes read, or 0 when it would block (ec clear) or failed (ec).
  // A recv it makes reads ahead no more than the records that fit in size (read_ahead_for).
  std::size_t read_now(char* data, std::size_t size, std::error_code& ec) {
    ec.clear();
    clear_errors();
    sys_error_ = 0;
    recv_limit_ = read_ahead_for(size);
    const int r = SSL_read(ssl_, data, clamp(size));
    recv_limit_ = buffer_pool::block_capacity;
    if (r > 0) return static_cast<std::size_t>(r);
    const int err = SSL_get_error(ssl_, r);
    if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) ec = map_error(err);
    return 0;
  }

  // What the TLS holds beyond the records read so far, given up for good (Vision's direct copy,
  // server/transport/vision_stream.hpp): the plaintext of the last record not yet read, then the
  // ciphertext received after it. BoringSSL reads a record's header and body and no further, so
  // the bytes past the last record are all in our coalescing buffer. No SSL_read may follow.
  void hand_over(std::string& out) {
    char tmp[4096];
    while (SSL_pending(ssl_) > 0) {
      const int r = SSL_read(ssl_, tmp, sizeof tmp);
      if (r <= 0) break;
      out.append(tmp, static_cast<std::size_t>(r));
    }
    if (in_pos_ < in_used_) out.append(in_ + in_pos_, in_used_ - in_pos_);
    drop_input();
  }

  // The caller stops reading for now (its buffer is full): ciphertext read ahead of it moves out of
  // the pooled block into a buffer of its own size, so the block goes back to the pool while the
  // caller waits (on a destination that does not read, for as long as that lasts).
  void release_read_ahead() {
    if (!in_block_ || in_pos_ == in_used_) return;
    const std::size_t left = in_used_ - in_pos_;
    auto rest = std::make_unique_for_overwrite<char[]>(left);
    std::memcpy(rest.get(), in_ + in_pos_, left);
    in_block_.reset();
    in_rest_ = std::move(rest);
    in_ = in_rest_.get();
    in_pos_ = 0;
    in_used_ = left;
  }

 private:
  // ERR_clear_error walks all 16 slots of the thread's queue (~600 instructions) even when it is
  // empty, which it nearly always is; it ran before every SSL_read (~64 per MiB relayed).
  static void clear_errors() {
    if (ERR_peek_error() != 0) ERR_clear_error();
  }

  static int clamp(std::size_t n) { return static_cast<int>(std::min<std::size_t>(n, 1 << 30)); }

  // The ciphertext of as many records as fill `room` bytes of plaintext: the records' bytes plus
  // at most 64 bytes each of header, tag and padding (TLS 1.3 AEAD: 22; TLS 1.2 GCM: 29; CBC: 57).
  static std::size_t read_ahead_for(std::size_t room) {
    constexpr std::size_t record = 16 * 1024, overhead = 64;
    return std::min(buffer_pool::block_capacity, room + (room / record + 1) * overhead);
  }

  void drop_input() {
    in_block_.reset();
    in_rest_.reset();
    in_ = nullptr;
    in_pos_ = in_used_ = 0;
  }

  template <class Buffers>
  static auto first_buffer(const Buffers& buffers) {
    for (auto it = asio::buffer_sequence_begin(buffers); it != asio::buffer_sequence_end(buffers); ++it)
      if (it->size() > 0) return *it;
    return *asio::buffer_sequence_begin(buffers);
  }

  bool buffered() const { return in_used_ > in_pos_ || SSL_pending(ssl_) > 0; }

  std::error_code map_error(int ssl_error) {
    if (ssl_error == SSL_ERROR_ZERO_RETURN) return asio::error::eof;
    if (ssl_error == SSL_ERROR_SSL) {
      const unsigned long e = ERR_get_error();
      return {static_cast<int>(e), asio::error::get_ssl_category()};
    }
    if (sys_error_ != 0) return {sys_error_, asio::error::get_system_category()};
    if (eof_) return asio::ssl::error::stream_truncated;  // TCP EOF without close_notify
    return asio::ssl::error::unspecified_system_error;
  }

  // Calls op until it succeeds or fails for good, waiting for the socket in between.
  //
  // An op that succeeds at once (SSL_read from records already buffered) completes inside the
  // initiating call (Asio 1.22's async_compose does not defer it), so the awaiting coroutine resumes
  // on this stack; one that reads again at once while data keeps coming (the Mux.Cool session's
  // reader, whose writes go to other coroutines) nests a level per record until the stack runs out
  // (ASan caught it under test_mux). Every max_inline-th completion in a row without a wait goes
  // through the executor instead: the stack unwinds, at the cost of one post per 16 records.
  static constexpr unsigned max_inline = 16;
  template <bool WithSize, class Op, class Token>
  auto run(Op op, Token&& token) {
    using signature = std::conditional_t<WithSize, void(std::error_code, std::size_t), void(std::error_code)>;
    return asio::async_compose<Token, signature>(
        [this, op, waited = false](auto& self, std::error_code wait_ec = {}) mutable {
          auto finish = [](auto& op_self, std::error_code ec, std::size_t n) {
            if constexpr (WithSize) {
              op_self.complete(ec, n);
            } else {
              (void)n;
              op_self.complete(ec);
            }
          };
          auto done = [&](std::error_code ec, std::size_t n) {
            if (waited) {
              inline_streak_ = 0;
            } else if (++inline_streak_ >= max_inline) {
              inline_streak_ = 0;
              auto ex = self.get_executor();
              asio::post(ex, [finish, op_self = std::move(self), ec, n]() mutable { finish(op_self, ec, n); });
              return;
            }
            finish(self, ec, n);
          };
          if (wait_ec) return done(wait_ec, 0);
          clear_errors();
          sys_error_ = 0;
          const int r = op(ssl_);
          if (r > 0) return done({}, static_cast<std::size_t>(r));
          const int err = SSL_get_error(ssl_, r);
          waited = err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE;
          if (err == SSL_ERROR_WANT_READ) return next_.socket().async_wait(tcp::socket::wait_read, std::move(self));
          if (err == SSL_ERROR_WANT_WRITE) return next_.socket().async_wait(tcp::socket::wait_write, std::move(self));
          done(map_error(err), 0);
        },
        token, next_.socket());
  }

  // BIO callbacks: reads go through a pooled coalescing buffer, writes straight to the socket.
  int bio_read(char* out, int len) {
    if (in_pos_ == in_used_) {
      if (!in_block_) {
        in_rest_.reset();
        in_block_ = buffer_pool::get();
        in_ = in_block_.get();
      }
      const int fd = next_.socket().native_handle();
      // What BoringSSL asks for now (a header, a record's rest) at least; a read_now() caller's
      // records at most (recv_limit_), else a block.
      const std::size_t want = std::max(static_cast<std::size_t>(len), recv_limit_);
      ssize_t n;
      do n = ::recv(fd, in_, std::min(want, buffer_pool::block_capacity), 0);
      while (n < 0 && errno == EINTR);
      if (n <= 0) {
        drop_input();  // nothing buffered: give the block back while we wait
        if (n == 0) {
          eof_ = true;
          return 0;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK) return -2;
        sys_error_ = errno;
        return -1;
      }
      apply_after_read(fd, next_.policy());
      in_pos_ = 0;
      in_used_ = static_cast<std::size_t>(n);
    }
    const std::size_t k = std::min(static_cast<std::size_t>(len), in_used_ - in_pos_);
    std::memcpy(out, in_ + in_pos_, k);
    in_pos_ += k;
    if (in_pos_ == in_used_) drop_input();
    return static_cast<int>(k);
  }

  int bio_write(const char* data, int len) {
    ssize_t n;
    do n = ::send(next_.socket().native_handle(), data, static_cast<std::size_t>(len), MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n >= 0) return static_cast<int>(n);
    if (errno == EAGAIN || errno == EWOULDBLOCK) return -2;
    sys_error_ = errno;
    return -1;
  }

  static const BIO_METHOD* method() {
    static BIO_METHOD* m = [] {
      BIO_METHOD* meth = BIO_meth_new(BIO_get_new_index(), "vlessbench tls socket");
      BIO_meth_set_read(meth, [](BIO* b, char* out, int len) {
        BIO_clear_retry_flags(b);
        const int r = static_cast<tls_stream*>(BIO_get_data(b))->bio_read(out, len);
        if (r == -2) BIO_set_retry_read(b);
        return r == -2 ? -1 : r;
      });
      BIO_meth_set_write(meth, [](BIO* b, const char* data, int len) {
        BIO_clear_retry_flags(b);
        const int r = static_cast<tls_stream*>(BIO_get_data(b))->bio_write(data, len);
        if (r == -2) BIO_set_retry_write(b);
        return r == -2 ? -1 : r;
      });
      BIO_meth_set_ctrl(meth, [](BIO*, int cmd, long, void*) -> long { return cmd == BIO_CTRL_FLUSH ? 1 : 0; });
      return meth;
    }();
    return m;
  }

  // REALITY: the ClientHello read and judged; authenticated, BoringSSL reads those bytes first.
  awaitable<std::error_code> open_reality(reality::listener_state& state);
  void preload(const std::vector<std::uint8_t>& bytes) {
    in_rest_ = std::make_unique<char[]>(bytes.size());
    std::memcpy(in_rest_.get(), bytes.data(), bytes.size());
    in_ = in_rest_.get();
    in_pos_ = 0;
    in_used_ = bytes.size();
  }

  policy_stream next_;
  SSL* ssl_ = nullptr;
  std::unique_ptr<reality::opening> refused_hello_;  // a REALITY refusal's ClientHello facts
  std::optional<std::string_view> failure_;          // failure()
  // Ciphertext received and not yet given to BoringSSL: in_ points into the pooled block, or into
  // in_rest_ once release_read_ahead() moved a remainder there.
  buffer_pool::block in_block_;
  std::unique_ptr<char[]> in_rest_;
  char* in_ = nullptr;
  std::size_t recv_limit_ = buffer_pool::block_capacity;
  std::size_t in_pos_ = 0;
  std::size_t in_used_ = 0;
  bool eof_ = false;
  int sys_error_ = 0;
  unsigned inline_streak_ = 0;  // completions in a row without a wait (run())
};

inline awaitable<std::error_code> tls_stream::open_reality(reality::listener_state& state) {
  std::error_code read_error;
  auto judged = co_await reality::read_and_judge(next_, state, read_error);
  if (judged.why == reality::refusal::none) {
    if (!reality::use_certificate(ssl_, state, judged.auth_key)) co_return asio::error::no_memory;
    preload(judged.hello);
    co_return std::error_code{};
  }
  failure_ = reality::to_string(judged.why);
  refused_hello_ = std::make_unique<reality::opening>();
  refused_hello_->ja4 = judged.ja4;
  refused_hello_->groups = judged.groups;
  refused_hello_->key_shares = judged.key_shares;
  if (read_error) co_return read_error;
  refused_hello_->fallback.emplace();
  const auto ended = co_await reality::relay_to_target(socket(), state, judged.hello, *refused_hello_->fallback);
  spdlog::debug("REALITY fallback: {}", ended);
  co_return reality::make_error_code(judged.why);
}

inline awaitable<std::error_code> tls_stream::open(const transport::open_clock& clock) {
  if (auto* state = reality::state_of(ssl_)) {
    if (auto refused = co_await open_reality(*state)) co_return refused;
  }
  auto [ec] = co_await async_handshake(asio::ssl::stream_base::server, as_tuple_awaitable);
  if (ec)
    failure_ = "tls_handshake_failed";
  else
    clock.stamp(&session_phases::tls_done);
  co_return ec;
}

static_assert(transport::client_transport<tls_stream>);

}  // namespace vlessbench
