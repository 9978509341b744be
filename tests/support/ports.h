// Loopback ports for tests that start a server which cannot pick its own port (etcd, dnsmasq,
// s3rver): a port the kernel just handed out, and whether something answers on one yet. Each test
// binds its own 127.0.x.y address where it can, so that runs side by side do not collide.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <system_error>

namespace quorate {

inline sockaddr_in LoopbackAddress(const std::string& ip, int port) {
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, ip.c_str(), &addr.sin_addr) != 1) {
    throw std::system_error(EINVAL, std::generic_category(), "not an IPv4 address: " + ip);
  }
  return addr;
}

// A port on `ip` that was free a moment ago (bound as port 0, read back, closed), for a socket of
// `type` (SOCK_STREAM or SOCK_DGRAM). Another process may take it in between: callers that start a
// server on it retry with a new one when the server cannot bind.
inline int FreePort(const std::string& ip = "127.0.0.1", int type = SOCK_STREAM) {
  sockaddr_in addr = LoopbackAddress(ip, 0);
  socklen_t len = sizeof addr;
  int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int err = errno;
    if (fd >= 0) close(fd);
    throw std::system_error(err, std::generic_category(), "picking a free port on " + ip);
  }
  close(fd);
  return ntohs(addr.sin_port);
}

// Whether a TCP connection to ip:port is accepted: the server started there is up.
inline bool TcpAnswers(int port, const std::string& ip = "127.0.0.1") {
  sockaddr_in addr = LoopbackAddress(ip, port);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  bool ok = fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  if (fd >= 0) close(fd);
  return ok;
}

// A hung server on ip:<free port>. SOCK_STREAM: it listens and never accepts, so the kernel
// completes the handshake, then nothing is ever read or written. SOCK_DGRAM: bound and never read,
// so datagrams vanish instead of being refused.
class SilentListener {
 public:
  explicit SilentListener(const std::string& ip = "127.0.0.1", int type = SOCK_STREAM) : ip_(ip) {
    sockaddr_in addr = LoopbackAddress(ip, 0);
    socklen_t len = sizeof addr;
    fd_ = socket(AF_INET, type | SOCK_CLOEXEC, 0);
    if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        (type == SOCK_STREAM && listen(fd_, 16) != 0) ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      int err = errno;
      if (fd_ >= 0) close(fd_);
      throw std::system_error(err, std::generic_category(), "listening on " + ip);
    }
    port_ = ntohs(addr.sin_port);
  }
  ~SilentListener() { close(fd_); }
  SilentListener(const SilentListener&) = delete;
  SilentListener& operator=(const SilentListener&) = delete;

  int port() const { return port_; }
  std::string url() const { return "http://" + ip_ + ":" + std::to_string(port_); }

 private:
  std::string ip_;
  int fd_ = -1;
  int port_ = 0;
};

}  // namespace quorate
