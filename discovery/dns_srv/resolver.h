// The DNS lookups the dns-srv provider makes, behind a seam: the provider's checks run against a fake
// in unit tests and against c-ares (one channel, owned by the resolver) in the binary.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "quorate/status.h"

namespace quorate::dns_srv {

struct SrvRecord {
  std::string target;  // as the server sent it, trailing dot and all
  uint16_t port = 0;
  uint16_t priority = 0;
  uint16_t weight = 0;
};

class Resolver {
 public:
  virtual ~Resolver() = default;
  // The SRV records at `name` (at least one). NotFound when the name does not exist or holds no SRV
  // records (NXDOMAIN, NODATA). Unavailable when no answer came (timeout, SERVFAIL, refused), with a
  // message naming the server and `name`.
  virtual Result<std::vector<SrvRecord>> LookupSrv(const std::string& name) = 0;
  // The A and AAAA addresses of `host` as text (at least one). NotFound and Unavailable as above.
  virtual Result<std::vector<std::string>> LookupHost(const std::string& host) = 0;
};

struct CaresOptions {
  // Comma-separated IP[:port] list ("127.0.0.1:5353", "[::1]:53"); empty means /etc/resolv.conf.
  std::string server;
  // How long the first try of each query waits (c-ares doubles it on each retry).
  std::chrono::milliseconds timeout{2000};
  int retries = 2;
};

// InvalidArgument when `server` is not a list of IP addresses with optional ports.
Result<std::unique_ptr<Resolver>> NewCaresResolver(const CaresOptions& options);

}  // namespace quorate::dns_srv
