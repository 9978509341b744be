// The Resolver on c-ares: one channel, driven by poll() until the query's callback has fired.
#include <ares.h>
#include <arpa/inet.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <poll.h>

#include <cerrno>
#include <charconv>
#include <mutex>

#include "resolver.h"

namespace quorate::dns_srv {
namespace {

// c-ares wants this once per process before the first channel; it is not thread-safe itself.
void InitLibraryOnce() {
  static std::once_flag once;
  std::call_once(once, [] { ares_library_init(ARES_LIB_INIT_ALL); });
}

bool ParsePort(std::string_view text) {
  unsigned port = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  return ec == std::errc() && end == text.data() + text.size() && port >= 1 && port <= 65535;
}

bool IsAddress(int family, std::string_view text) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(family, std::string(text).c_str(), buf) == 1;
}

// c-ares' own parser reads a bad port as 0 and silently uses 53, so the list is checked here first.
bool IsServerEntry(std::string_view entry) {
  if (!entry.empty() && entry.front() == '[') {
    size_t close = entry.find(']');
    if (close == std::string_view::npos || !IsAddress(AF_INET6, entry.substr(1, close - 1))) return false;
    std::string_view rest = entry.substr(close + 1);
    return rest.empty() || (rest.front() == ':' && ParsePort(rest.substr(1)));
  }
  if (IsAddress(AF_INET6, entry)) return true;
  size_t colon = entry.find(':');
  if (colon == std::string_view::npos) return IsAddress(AF_INET, entry);
  return IsAddress(AF_INET, entry.substr(0, colon)) && ParsePort(entry.substr(colon + 1));
}

Status CheckServerList(const std::string& text) {
  size_t start = 0;
  while (true) {
    size_t comma = text.find(',', start);
    std::string_view entry =
        std::string_view(text).substr(start, comma == std::string::npos ? comma : comma - start);
    if (!IsServerEntry(entry)) {
      return Status::InvalidArgument(
          fmt::format("server '{}' is not an IP address with an optional port (use e.g. 10.0.0.10, "
                      "10.0.0.10:5353 or [fd00::a]:53; c-ares cannot look up the DNS server's own name)",
                      entry));
    }
    if (comma == std::string::npos) return Status::Ok();
    start = comma + 1;
  }
}

std::string DescribeServers(ares_channel channel) {
  ares_addr_port_node* servers = nullptr;
  if (ares_get_servers_ports(channel, &servers) != ARES_SUCCESS) return "the configured DNS server";
  std::vector<std::string> names;
  for (ares_addr_port_node* s = servers; s != nullptr; s = s->next) {
    char ip[INET6_ADDRSTRLEN] = {};
    inet_ntop(s->family, &s->addr, ip, sizeof ip);
    int port = s->udp_port == 0 ? 53 : s->udp_port;
    names.push_back(s->family == AF_INET6 ? fmt::format("[{}]:{}", ip, port)
                                          : fmt::format("{}:{}", ip, port));
  }
  ares_free_data(servers);
  return names.empty() ? "no DNS server" : fmt::format("{}", fmt::join(names, ","));
}

// `what` is the kind of record asked for ("SRV", "A/AAAA"), `name` the name asked about.
Status FromAres(int status, const std::string& what, const std::string& name, const std::string& servers) {
  switch (status) {
    case ARES_ENOTFOUND:
      return Status::NotFound(fmt::format("{} does not exist (NXDOMAIN from {})", name, servers));
    case ARES_ENODATA:
      return Status::NotFound(fmt::format("{} has no {} records (answer from {})", name, what, servers));
    case ARES_ETIMEOUT:
    case ARES_ECONNREFUSED:
    case ARES_ESERVFAIL:
    case ARES_EREFUSED:
    case ARES_EFORMERR:
    case ARES_ENOTIMP:
    case ARES_EBADRESP:
    case ARES_ECANCELLED:
      return Status::Unavailable(fmt::format(
          "DNS server {} gave no answer for the {} records of {}: {} (check that it is up and serves "
          "this domain, or pick another with server=)",
          servers, what, name, ares_strerror(status)));
    case ARES_EBADNAME:
      // The names asked are checked before any lookup (IsDnsName), so a bad one is in the answer:
      // what a server sends is fetched at run time, retried like a missing answer, never bad input.
      return Status::Unavailable(fmt::format(
          "DNS server {} answered for the {} records of {} with a malformed name that does not parse (check the "
          "server, or pick another with server=)",
          servers, what, name));
    default:
      return Status::Internal(fmt::format("looking up the {} records of {} at {}: {}", what, name, servers,
                                          ares_strerror(status)));
  }
}

struct SrvCall {
  bool done = false;
  int status = ARES_SUCCESS;
  std::vector<SrvRecord> records;
};

void OnSrvReply(void* arg, int status, int /*timeouts*/, unsigned char* abuf, int alen) {
  auto* call = static_cast<SrvCall*>(arg);
  call->done = true;
  call->status = status;
  if (status != ARES_SUCCESS) return;
  ares_srv_reply* reply = nullptr;
  call->status = ares_parse_srv_reply(abuf, alen, &reply);
  for (ares_srv_reply* r = reply; r != nullptr; r = r->next) {
    call->records.push_back({r->host, r->port, r->priority, r->weight});
  }
  if (reply != nullptr) ares_free_data(reply);
}

struct HostCall {
  bool done = false;
  int status = ARES_SUCCESS;
  std::vector<std::string> addresses;
};

void OnHostReply(void* arg, int status, int /*timeouts*/, ares_addrinfo* info) {
  auto* call = static_cast<HostCall*>(arg);
  call->done = true;
  call->status = status;
  if (info == nullptr) return;
  for (ares_addrinfo_node* n = info->nodes; n != nullptr; n = n->ai_next) {
    char ip[INET6_ADDRSTRLEN] = {};
    const void* addr = n->ai_family == AF_INET6
                           ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(n->ai_addr)->sin6_addr)
                           : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(n->ai_addr)->sin_addr);
    if (inet_ntop(n->ai_family, addr, ip, sizeof ip) != nullptr) call->addresses.emplace_back(ip);
  }
  ares_freeaddrinfo(info);
}

class CaresResolver : public Resolver {
 public:
  explicit CaresResolver(ares_channel channel) : channel_(channel), servers_(DescribeServers(channel)) {}
  ~CaresResolver() override { ares_destroy(channel_); }
  CaresResolver(const CaresResolver&) = delete;
  CaresResolver& operator=(const CaresResolver&) = delete;

  Result<std::vector<SrvRecord>> LookupSrv(const std::string& name) override {
    SrvCall call;
    ares_query(channel_, name.c_str(), 1 /* C_IN */, 33 /* T_SRV */, OnSrvReply, &call);
    RunUntil(call.done);
    if (call.status != ARES_SUCCESS) return FromAres(call.status, "SRV", name, servers_);
    if (call.records.empty()) return FromAres(ARES_ENODATA, "SRV", name, servers_);
    return std::move(call.records);
  }

  Result<std::vector<std::string>> LookupHost(const std::string& host) override {
    HostCall call;
    ares_addrinfo_hints hints = {};
    hints.ai_family = AF_UNSPEC;      // A and AAAA both
    hints.ai_flags = ARES_AI_NOSORT;  // sorting would connect() to each address
    ares_getaddrinfo(channel_, host.c_str(), nullptr, &hints, OnHostReply, &call);
    RunUntil(call.done);
    if (call.status != ARES_SUCCESS) return FromAres(call.status, "A/AAAA", host, servers_);
    if (call.addresses.empty()) return FromAres(ARES_ENODATA, "A/AAAA", host, servers_);
    return std::move(call.addresses);
  }

 private:
  // c-ares guarantees every query ends in its callback: by an answer, by running out of tries, or
  // by ares_cancel, which is how a failing poll() ends the wait instead of hanging.
  void RunUntil(const bool& done) {
    while (!done) {
      ares_socket_t socks[ARES_GETSOCK_MAXNUM];
      int bits = ares_getsock(channel_, socks, ARES_GETSOCK_MAXNUM);
      pollfd fds[ARES_GETSOCK_MAXNUM];
      nfds_t nfds = 0;
      for (int i = 0; i < ARES_GETSOCK_MAXNUM; ++i) {
        short events = 0;
        if (ARES_GETSOCK_READABLE(bits, i)) events |= POLLIN;
        if (ARES_GETSOCK_WRITABLE(bits, i)) events |= POLLOUT;
        if (events != 0) fds[nfds++] = {socks[i], events, 0};
      }
      timeval max_wait = {1, 0};
      timeval tv;
      timeval* wait = ares_timeout(channel_, &max_wait, &tv);
      int ms = static_cast<int>(wait->tv_sec * 1000 + (wait->tv_usec + 999) / 1000);
      int n = poll(fds, nfds, ms);
      if (n < 0) {
        if (errno != EINTR) ares_cancel(channel_);
        continue;
      }
      if (n == 0) {
        ares_process_fd(channel_, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
        continue;
      }
      for (nfds_t i = 0; i < nfds; ++i) {
        short r = fds[i].revents;
        ares_process_fd(channel_, (r & (POLLIN | POLLERR | POLLHUP)) ? fds[i].fd : ARES_SOCKET_BAD,
                        (r & POLLOUT) ? fds[i].fd : ARES_SOCKET_BAD);
      }
    }
  }

  ares_channel channel_;
  std::string servers_;  // for messages: "127.0.0.1:5353"
};

}  // namespace

Result<std::unique_ptr<Resolver>> NewCaresResolver(const CaresOptions& options) {
  if (!options.server.empty()) {
    if (Status s = CheckServerList(options.server); !s.ok()) return s;
  }
  InitLibraryOnce();
  ares_options opts = {};
  // The SRV targets are fully qualified: search domains and HOSTALIASES would only add wrong answers.
  opts.flags = ARES_FLAG_NOSEARCH | ARES_FLAG_NOALIASES;
  opts.timeout = static_cast<int>(options.timeout.count());
  opts.tries = options.retries + 1;
  // DNS only, not /etc/hosts: a local hosts entry would hide a target that other nodes cannot resolve.
  char lookups[] = "b";
  opts.lookups = lookups;
  ares_channel channel = nullptr;
  int status = ares_init_options(&channel, &opts,
                                 ARES_OPT_FLAGS | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES | ARES_OPT_LOOKUPS);
  if (status != ARES_SUCCESS) {
    return Status::Internal(fmt::format("starting the DNS resolver (c-ares): {}", ares_strerror(status)));
  }
  if (!options.server.empty()) {
    status = ares_set_servers_ports_csv(channel, options.server.c_str());
    if (status != ARES_SUCCESS) {
      ares_destroy(channel);
      return Status::InvalidArgument(
          fmt::format("server '{}': c-ares refuses it: {}", options.server, ares_strerror(status)));
    }
  }
  return std::unique_ptr<Resolver>(new CaresResolver(channel));
}

}  // namespace quorate::dns_srv
