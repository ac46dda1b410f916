#include "core/net/udp_dest.hpp"

#include <cerrno>
#include <algorithm>
#include <cstring>

#include <array>

#include <linux/filter.h>
#include <netinet/in.h>
#include <sys/socket.h>

namespace vlessbench {

using udp = asio::ip::udp;

namespace {

std::error_code last_error() { return {errno, std::system_category()}; }

int set_flag(int fd, int level, int name) {
  const int on = 1;
  return ::setsockopt(fd, level, name, &on, sizeof on);
}

// The control buffer holds either kind of PKTINFO.
union control_buffer {
  cmsghdr align;
  char bytes[CMSG_SPACE(sizeof(in6_pktinfo)) + CMSG_SPACE(sizeof(in_pktinfo))];
};

}  // namespace

std::error_code enable_destination_address(udp::socket& socket) {
  const int fd = socket.native_handle();
  std::error_code ec;
  const bool v6 = socket.local_endpoint(ec).protocol() == udp::v6();
  if (ec) return ec;
  if (v6 ? set_flag(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO) != 0 : set_flag(fd, IPPROTO_IP, IP_PKTINFO) != 0)
    return last_error();
  return {};
}

namespace {

// The filter: accept (keep the whole datagram) or drop (0). Loads relative to the network header
// (SKF_NET_OFF) read the IPv4 or IPv6 addresses; a dual-stack socket gets both kinds.
constexpr std::uint32_t net_off(std::int32_t k) { return static_cast<std::uint32_t>(SKF_NET_OFF + k); }
constexpr std::uint32_t ifindex_off = static_cast<std::uint32_t>(SKF_AD_OFF + SKF_AD_IFINDEX);
constexpr std::uint32_t loopback_ifindex = 1;  // Linux's LOOPBACK_IFINDEX, in every namespace

constexpr sock_filter stmt(std::uint16_t code, std::uint32_t k) { return sock_filter{code, 0, 0, k}; }
constexpr sock_filter jump(std::uint16_t code, std::uint32_t k, std::uint8_t jt, std::uint8_t jf) {
  return sock_filter{code, jt, jf, k};
}

// Indices: 0-4 dispatch, 5-8 IPv4, 9-24 IPv6 (four words), 25 drop, 26 accept. A jump's offsets
// count from the next instruction. Each compare: source into X, destination into A, A == X.
constexpr std::array<sock_filter, 27> forged_local_source_filter() {
  constexpr std::uint8_t drop = 25, accept = 26;
  std::array<sock_filter, 27> f{};
  auto to = [](std::size_t at, std::uint8_t target) { return static_cast<std::uint8_t>(target - at - 1); };
  f[0] = stmt(BPF_LD | BPF_W | BPF_ABS, ifindex_off);
  f[1] = jump(BPF_JMP | BPF_JEQ | BPF_K, loopback_ifindex, to(1, accept), 0);
  f[2] = stmt(BPF_LD | BPF_B | BPF_ABS, net_off(0));
  f[3] = stmt(BPF_ALU | BPF_RSH | BPF_K, 4);
  f[4] = jump(BPF_JMP | BPF_JEQ | BPF_K, 4, 0, to(4, 9));
  // IPv4: source at 12, destination at 16.
  f[5] = stmt(BPF_LD | BPF_W | BPF_ABS, net_off(12));
  f[6] = stmt(BPF_MISC | BPF_TAX, 0);
  f[7] = stmt(BPF_LD | BPF_W | BPF_ABS, net_off(16));
  f[8] = jump(BPF_JMP | BPF_JEQ | BPF_X, 0, to(8, drop), to(8, accept));
  // IPv6: source at 8, destination at 24, 16 bytes each: equal word by word, else accept.
  for (std::size_t w = 0; w < 4; ++w) {
    const std::size_t at = 9 + w * 4;
    const auto off = static_cast<std::int32_t>(w * 4);
    f[at] = stmt(BPF_LD | BPF_W | BPF_ABS, net_off(8 + off));
    f[at + 1] = stmt(BPF_MISC | BPF_TAX, 0);
    f[at + 2] = stmt(BPF_LD | BPF_W | BPF_ABS, net_off(24 + off));
    f[at + 3] = jump(BPF_JMP | BPF_JEQ | BPF_X, 0, 0, to(at + 3, accept));
  }
  // f[24]'s true branch (all four words equal) falls through to drop. A load past the packet's end
  // also ends the filter with 0 (drop): every datagram has its network header.
  f[drop] = stmt(BPF_RET | BPF_K, 0);
  f[accept] = stmt(BPF_RET | BPF_K, 0xffffffffU);
  return f;
}

}  // namespace

std::error_code drop_forged_local_sources(udp::socket& socket) {
  static constexpr auto filter = forged_local_source_filter();
  sock_fprog prog{static_cast<unsigned short>(filter.size()),
                  const_cast<sock_filter*>(filter.data())};  // NOLINT: the kernel copies it
  if (::setsockopt(socket.native_handle(), SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) != 0) return last_error();
  return {};
}

namespace {

// The system calls, outside the coroutines (a cmsghdr, with its flexible array, cannot live in a
// coroutine frame). Each returns would_block when the socket has nothing for it yet.

std::error_code try_receive(udp::socket& socket, asio::mutable_buffer buf, datagram& out) {
  sockaddr_storage from{};
  iovec iov{buf.data(), buf.size()};
  control_buffer control{};
  msghdr msg{};
  msg.msg_name = &from;
  msg.msg_namelen = sizeof from;
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.bytes;
  msg.msg_controllen = sizeof control.bytes;
  ssize_t n = 0;
  do n = ::recvmsg(socket.native_handle(), &msg, MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  if (n < 0) return last_error();
  out.size = static_cast<std::size_t>(n);
  udp::endpoint peer;
  std::memcpy(peer.data(), &from, std::min<std::size_t>(msg.msg_namelen, sizeof from));
  out.peer = peer;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
      in_pktinfo info{};
      std::memcpy(&info, CMSG_DATA(c), sizeof info);
      asio::ip::address_v4::bytes_type b{};
      std::memcpy(b.data(), &info.ipi_addr, b.size());
      out.local.address(asio::ip::address_v4(b));
    } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
      in6_pktinfo info{};
      std::memcpy(&info, CMSG_DATA(c), sizeof info);
      asio::ip::address_v6::bytes_type b{};
      std::memcpy(b.data(), &info.ipi6_addr, b.size());
      out.local.address(asio::ip::address_v6(b));
    }
  }
  return {};
}

std::error_code try_send(udp::socket& socket, const udp::endpoint& own, asio::const_buffer data,
                         const udp::endpoint& peer, const udp::endpoint& local) {
  // Only a wildcard socket needs (or may be given) a source: a bound one has its address.
  const bool choose_source = own.address().is_unspecified() && !local.address().is_unspecified();
  control_buffer control{};
  msghdr msg{};
  iovec iov{const_cast<void*>(data.data()), data.size()};                   // NOLINT: sendmsg takes a non-const iovec
  msg.msg_name = const_cast<void*>(static_cast<const void*>(peer.data()));  // NOLINT: likewise
  msg.msg_namelen = static_cast<socklen_t>(peer.size());
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (choose_source) {
    msg.msg_control = control.bytes;
    if (own.protocol() == udp::v6()) {
      msg.msg_controllen = CMSG_SPACE(sizeof(in6_pktinfo));
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = IPPROTO_IPV6;
      c->cmsg_type = IPV6_PKTINFO;
      c->cmsg_len = CMSG_LEN(sizeof(in6_pktinfo));
      in6_pktinfo info{};
      const auto b = local.address().is_v6()
                         ? local.address().to_v6().to_bytes()
                         : asio::ip::make_address_v6(asio::ip::v4_mapped, local.address().to_v4()).to_bytes();
      std::memcpy(&info.ipi6_addr, b.data(), b.size());
      std::memcpy(CMSG_DATA(c), &info, sizeof info);
    } else if (local.address().is_v4()) {
      msg.msg_controllen = CMSG_SPACE(sizeof(in_pktinfo));
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = IPPROTO_IP;
      c->cmsg_type = IP_PKTINFO;
      c->cmsg_len = CMSG_LEN(sizeof(in_pktinfo));
      in_pktinfo info{};
      const auto b = local.address().to_v4().to_bytes();
      std::memcpy(&info.ipi_spec_dst, b.data(), b.size());
      std::memcpy(CMSG_DATA(c), &info, sizeof info);
    }
  }
  ssize_t n = 0;
  do n = ::sendmsg(socket.native_handle(), &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  return n < 0 ? last_error() : std::error_code{};
}

bool would_block(const std::error_code& ec) {
  return ec == std::errc::resource_unavailable_try_again || ec == std::errc::operation_would_block;
}

}  // namespace

awaitable<std::error_code> receive_datagram(udp::socket& socket, const udp::endpoint& own, asio::mutable_buffer buf,
                                            datagram& out) {
  out.local = own;
  for (;;) {
    const auto ec = try_receive(socket, buf, out);
    if (!would_block(ec)) co_return ec;
    auto [wec] = co_await socket.async_wait(udp::socket::wait_read, as_tuple_awaitable);
    if (wec) co_return wec;
  }
}

awaitable<std::error_code> send_datagram_from(udp::socket& socket, const udp::endpoint& own, asio::const_buffer data,
                                              const udp::endpoint& peer, const udp::endpoint& local) {
  for (int attempt = 0;; ++attempt) {
    const auto ec = try_send(socket, own, data, peer, local);
    if (!would_block(ec) || attempt > 0) co_return ec;
    auto [wec] = co_await socket.async_wait(udp::socket::wait_write, as_tuple_awaitable);
    if (wec) co_return wec;
  }
}

}  // namespace vlessbench
