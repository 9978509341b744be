// The dns-srv provider's merge and checks, on a fake resolver; tests/dns/ runs the same against dnsmasq.
#include "../../discovery/dns_srv/dns_srv.h"

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <thread>

#include "quorate/provider.h"

namespace quorate::dns_srv {
namespace {

// Answers from tables; a name in neither table is NXDOMAIN. Records every lookup.
class FakeResolver : public Resolver {
 public:
  std::map<std::string, Result<std::vector<SrvRecord>>> srv;
  std::map<std::string, Result<std::vector<std::string>>> hosts;
  std::vector<std::string> lookups;

  Result<std::vector<SrvRecord>> LookupSrv(const std::string& name) override {
    lookups.push_back("SRV " + name);
    auto it = srv.find(name);
    if (it == srv.end()) return Status::NotFound(name + " does not exist");
    return it->second;
  }
  Result<std::vector<std::string>> LookupHost(const std::string& host) override {
    lookups.push_back("A " + host);
    auto it = hosts.find(host);
    if (it == hosts.end()) return Status::NotFound(host + " does not exist");
    return it->second;
  }

  // Three hosts etcd-0..2.example.com that resolve.
  void AddHosts(int n = 3) {
    for (int i = 0; i < n; ++i)
      hosts.emplace(Host(i), std::vector<std::string>{"10.0.0." + std::to_string(i)});
  }
  static std::string Host(int i) { return "etcd-" + std::to_string(i) + ".example.com"; }
};

const std::string kSecure = "_etcd-server-ssl._tcp.example.com";
const std::string kPlain = "_etcd-server._tcp.example.com";

SrvQuery Query() {
  SrvQuery q;
  q.domain = "example.com";
  return q;
}

std::vector<SrvRecord> Records(std::vector<std::pair<std::string, uint16_t>> targets) {
  std::vector<SrvRecord> out;
  for (auto& [target, port] : targets) out.push_back({target, port, 0, 0});
  return out;
}

bool Mentions(const Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

TEST_CASE("dns-srv record names follow etcd's --discovery-srv and --discovery-srv-name") {
  SrvQuery q = Query();
  CHECK(q.RecordName(true) == kSecure);
  CHECK(q.RecordName(false) == kPlain);
  q.suffix = "prod";
  q.service = "db";
  CHECK(q.RecordName(true) == "_db-ssl-prod._tcp.example.com");
  CHECK(q.RecordName(false) == "_db-prod._tcp.example.com");
}

TEST_CASE("dns-srv: http only gives http peer and client URLs, named by the first label") {
  FakeResolver r;
  r.AddHosts();
  r.srv.emplace(
      kPlain,
      Records({{"etcd-2.example.com.", 2380}, {"etcd-0.example.com.", 2380}, {"etcd-1.example.com.", 2380}}));
  auto members = DiscoverSrvMembers(Query(), r);
  REQUIRE(members.ok());
  REQUIRE(members->size() == 3);
  CHECK((*members)[0] ==
        Member{"etcd-0", {"http://etcd-0.example.com:2380"}, {"http://etcd-0.example.com:2379"}});
  CHECK((*members)[2].name == "etcd-2");
}

TEST_CASE("dns-srv: both schemes merge, a host in both gets both peer URLs") {
  FakeResolver r;
  r.AddHosts();
  r.srv.emplace(kSecure, Records({{"etcd-0.example.com.", 2380}, {"etcd-1.example.com.", 2380}}));
  r.srv.emplace(kPlain, Records({{"etcd-0.example.com.", 2390}, {"etcd-2.example.com.", 2380}}));
  auto members = DiscoverSrvMembers(Query(), r);
  REQUIRE(members.ok());
  REQUIRE(members->size() == 3);
  CHECK((*members)[0].peer_urls ==
        std::vector<std::string>{"http://etcd-0.example.com:2390", "https://etcd-0.example.com:2380"});
  CHECK((*members)[0].client_urls ==
        std::vector<std::string>{"http://etcd-0.example.com:2379", "https://etcd-0.example.com:2379"});
  CHECK((*members)[1].peer_urls == std::vector<std::string>{"https://etcd-1.example.com:2380"});
  CHECK((*members)[2].peer_urls == std::vector<std::string>{"http://etcd-2.example.com:2380"});
}

TEST_CASE("dns-srv: https only is enough; the missing http records are not an error") {
  FakeResolver r;
  r.AddHosts(1);
  r.srv.emplace(kSecure, Records({{"etcd-0.example.com.", 2380}}));
  auto members = DiscoverSrvMembers(Query(), r);
  REQUIRE(members.ok());
  CHECK((*members)[0].peer_urls == std::vector<std::string>{"https://etcd-0.example.com:2380"});
}

TEST_CASE("dns-srv: the suffix picks its own records and ignores the plain ones") {
  FakeResolver r;
  r.AddHosts();
  r.srv.emplace(kSecure, Records({{"etcd-0.example.com.", 2380}}));
  r.srv.emplace("_etcd-server-ssl-prod._tcp.example.com", Records({{"etcd-1.example.com", 2380}}));
  r.srv.emplace("_etcd-server-prod._tcp.example.com", Records({{"etcd-2.example.com", 2380}}));
  SrvQuery q = Query();
  q.suffix = "prod";
  auto members = DiscoverSrvMembers(q, r);
  REQUIRE(members.ok());
  REQUIRE(members->size() == 2);
  CHECK((*members)[0].name == "etcd-1");
  CHECK((*members)[0].peer_urls == std::vector<std::string>{"https://etcd-1.example.com:2380"});
  CHECK((*members)[1].peer_urls == std::vector<std::string>{"http://etcd-2.example.com:2380"});
}

TEST_CASE("dns-srv: identical records count once, names compare without case or trailing dot") {
  FakeResolver r;
  r.AddHosts(1);
  r.srv.emplace(
      kSecure,
      Records({{"etcd-0.example.com.", 2380}, {"etcd-0.example.com.", 2380}, {"ETCD-0.Example.COM", 2380}}));
  auto members = DiscoverSrvMembers(Query(), r);
  REQUIRE(members.ok());
  REQUIRE(members->size() == 1);
  CHECK((*members)[0].peer_urls == std::vector<std::string>{"https://etcd-0.example.com:2380"});
  CHECK((*members)[0].client_urls.size() == 1);
  // Each distinct host is resolved once.
  CHECK(std::count(r.lookups.begin(), r.lookups.end(), "A etcd-0.example.com") == 1);
}

TEST_CASE("dns-srv: one name from two hosts is a wrong answer, retried, naming both") {
  FakeResolver r;
  r.hosts.emplace("etcd-0.a.example.com", std::vector<std::string>{"10.0.0.1"});
  r.hosts.emplace("etcd-0.b.example.com", std::vector<std::string>{"10.0.0.2"});
  r.srv.emplace(kSecure, Records({{"etcd-0.a.example.com.", 2380}}));
  r.srv.emplace(kPlain, Records({{"etcd-0.b.example.com.", 2380}}));
  auto members = DiscoverSrvMembers(Query(), r);
  REQUIRE(members.status().IsUnavailable());
  CHECK(Mentions(members.status(), "etcd-0.a.example.com"));
  CHECK(Mentions(members.status(), "etcd-0.b.example.com"));
  CHECK(Mentions(members.status(), "'etcd-0'"));
}

TEST_CASE("dns-srv: a target that does not resolve is retried (not bad input), naming it and its record") {
  FakeResolver r;
  r.AddHosts(1);
  r.srv.emplace(kPlain, Records({{"etcd-0.example.com.", 2380}, {"ghost.example.com.", 2380}}));
  auto members = DiscoverSrvMembers(Query(), r);
  REQUIRE(members.status().IsUnavailable());
  CHECK(Mentions(members.status(), "ghost.example.com"));
  CHECK(Mentions(members.status(), kPlain));
  CHECK(Mentions(members.status(), "A or AAAA"));
}

TEST_CASE("dns-srv: bogus targets and port 0 are wrong answers, retried, before anything is resolved") {
  for (const char* target :
       {"", ".", "-bad.example.com.", "a..b.", "under score.example.com", "10.0.0.1.", "[::1]"}) {
    CAPTURE(target);
    FakeResolver r;
    r.srv.emplace(kSecure, Records({{target, 2380}}));
    auto members = DiscoverSrvMembers(Query(), r);
    REQUIRE(members.status().IsUnavailable());
    CHECK(Mentions(members.status(), kSecure));
    CHECK(std::none_of(r.lookups.begin(), r.lookups.end(), [](const std::string& l) { return l[0] == 'A'; }));
  }
  FakeResolver r;
  r.AddHosts(1);
  r.srv.emplace(kSecure, Records({{"etcd-0.example.com.", 0}}));
  auto members = DiscoverSrvMembers(Query(), r);
  REQUIRE(members.status().IsUnavailable());
  CHECK(Mentions(members.status(), "port"));
}

TEST_CASE("dns-srv: no records under either name is NotFound, naming both") {
  FakeResolver r;
  auto members = DiscoverSrvMembers(Query(), r);
  REQUIRE(members.status().IsNotFound());
  CHECK(Mentions(members.status(), kSecure));
  CHECK(Mentions(members.status(), kPlain));
  // An empty answer counts as no answer.
  r.srv.emplace(kPlain, std::vector<SrvRecord>{});
  CHECK(DiscoverSrvMembers(Query(), r).status().IsNotFound());
}

TEST_CASE("dns-srv: a server that does not answer is Unavailable, never a partial member list") {
  const Status timeout = Status::Unavailable("DNS server 10.0.0.53:53 gave no answer: Timeout");
  SUBCASE("first query") {
    FakeResolver r;
    r.AddHosts(1);
    r.srv.emplace(kSecure, timeout);
    r.srv.emplace(kPlain, Records({{"etcd-0.example.com.", 2380}}));
    auto members = DiscoverSrvMembers(Query(), r);
    REQUIRE(members.status().IsUnavailable());
    CHECK(Mentions(members.status(), "10.0.0.53:53"));
  }
  SUBCASE("second query, after records from the first") {
    FakeResolver r;
    r.AddHosts(1);
    r.srv.emplace(kSecure, Records({{"etcd-0.example.com.", 2380}}));
    r.srv.emplace(kPlain, timeout);
    CHECK(DiscoverSrvMembers(Query(), r).status().IsUnavailable());
  }
  SUBCASE("host lookup: retry, not bad input") {
    FakeResolver r;
    r.srv.emplace(kSecure, Records({{"etcd-0.example.com.", 2380}}));
    r.hosts.emplace("etcd-0.example.com", timeout);
    CHECK(DiscoverSrvMembers(Query(), r).status().IsUnavailable());
  }
}

// A DNS server on 127.0.0.1 (UDP, port 0) whose every answer holds a record whose owner name is a
// compression pointer to itself: well-formed up to the name, which never ends.
class LoopingNameDns {
 public:
  LoopingNameDns() {
    fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    socklen_t len = sizeof addr;
    REQUIRE(getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~LoopingNameDns() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }
  std::string server() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  void Serve() {
    unsigned char query[512];
    while (!stop_) {
      pollfd readable{fd_, POLLIN, 0};
      if (poll(&readable, 1, 50) != 1) continue;
      sockaddr_in from{};
      socklen_t len = sizeof from;
      ssize_t n = recvfrom(fd_, query, sizeof query, 0, reinterpret_cast<sockaddr*>(&from), &len);
      if (n <= 12) continue;
      size_t end = 12;  // the question: its name, then type and class
      while (end < static_cast<size_t>(n) && query[end] != 0) end += query[end] + 1;
      end += 5;
      if (end > static_cast<size_t>(n)) continue;
      std::string answer(reinterpret_cast<char*>(query), end);
      answer[2] = static_cast<char>(0x81);  // a response, recursion desired
      answer[3] = static_cast<char>(0x80);  // recursion available, no error
      answer.replace(6, 6, std::string("\0\1\0\0\0\0", 6));  // one answer, no authority or additional
      const size_t self = answer.size();
      answer += static_cast<char>(0xc0 | (self >> 8));
      answer += static_cast<char>(self & 0xff);
      answer += std::string(reinterpret_cast<char*>(query) + end - 4, 4);  // the type and class asked
      answer += std::string("\0\0\0\x3c\0\x04\x7f\0\0\x01", 10);     // TTL 60, 4 bytes of data
      sendto(fd_, answer.data(), answer.size(), 0, reinterpret_cast<sockaddr*>(&from), len);
    }
  }
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST_CASE("dns-srv: an answer that does not parse is a runtime failure, retried, not bad input") {
  LoopingNameDns dns;
  CaresOptions options;
  options.server = dns.server();
  options.timeout = std::chrono::milliseconds(500);
  options.retries = 0;
  auto resolver = NewCaresResolver(options);
  REQUIRE(resolver.ok());
  auto srv = (*resolver)->LookupSrv(kSecure);
  REQUIRE_FALSE(srv.ok());
  CHECK_MESSAGE(srv.status().IsUnavailable(), srv.status().message());
  CHECK_MESSAGE(Mentions(srv.status(), "malformed name that does not parse"), srv.status().message());
  CHECK(Mentions(srv.status(), dns.server()));
  auto host = (*resolver)->LookupHost("etcd-0.example.com");
  REQUIRE_FALSE(host.ok());
  CHECK_MESSAGE(host.status().IsUnavailable(), host.status().message());
  CHECK(DiscoverSrvMembers(Query(), **resolver).status().IsUnavailable());
}

TEST_CASE("dns-srv host names follow Go's rules") {
  CHECK(IsDnsName("etcd-0.example.com"));
  CHECK(IsDnsName("_etcd-server-ssl._tcp.example.com"));
  CHECK(IsDnsName("a"));
  CHECK(IsDnsName("0a.example"));
  CHECK_FALSE(IsDnsName(""));
  CHECK_FALSE(IsDnsName("example.com."));
  CHECK_FALSE(IsDnsName("a-.example"));
  CHECK_FALSE(IsDnsName("127.0.0.1"));
  CHECK_FALSE(IsDnsName(std::string(64, 'a') + ".example"));
  CHECK(IsDnsName(std::string(63, 'a') + ".example"));
  CHECK_FALSE(IsDnsName(std::string(250, 'a')
                            .replace(60, 1, ".")
                            .replace(120, 1, ".")
                            .replace(180, 1, ".")
                            .replace(240, 1, ".") +
                        ".example"));
}

Result<std::unique_ptr<DiscoveryProvider>> Create(const std::string& text) {
  auto spec = ParseDiscoverySpec(text);
  REQUIRE(spec.ok());
  return ProviderRegistry::Get().Create(*spec);
}

TEST_CASE("dns-srv provider keys") {
  auto p = Create("provider=dns-srv domain=Example.com.");
  REQUIRE(p.ok());
  CHECK((*p)->Describe() == "dns-srv _etcd-server-ssl._tcp.example.com + _etcd-server._tcp.example.com");
  CHECK_FALSE((*p)->ImpliedSize().has_value());

  p = Create(
      "provider=dns-srv domain=example.com service=db name=prod server=127.0.0.1:5353 timeout=500ms "
      "retries=0");
  REQUIRE(p.ok());
  CHECK((*p)->Describe() ==
        "dns-srv _db-ssl-prod._tcp.example.com + _db-prod._tcp.example.com via 127.0.0.1:5353");
  CHECK(Create("provider=dns-srv domain=example.com name=").ok());
  CHECK(Create("provider=dns-srv domain=example.com server=[::1]:53,10.0.0.1").ok());

  struct Bad {
    const char* spec;
    const char* mentions;
  };
  for (const Bad& bad :
       {Bad{"provider=dns-srv", "domain="}, Bad{"provider=dns-srv domain=", "domain="},
        Bad{"provider=dns-srv domain=x.com port=53", "'port'"},
        Bad{"provider=dns-srv domain=.", "domain='.'"}, Bad{"provider=dns-srv domain=a..b", "domain='a..b'"},
        Bad{"provider=dns-srv domain=x.com service=_etcd-server", "leading '_'"},
        Bad{"provider=dns-srv domain=x.com name=a.b", "name='a.b'"},
        Bad{"provider=dns-srv domain=x.com server=dns.local:53", "dns.local:53"},
        Bad{"provider=dns-srv domain=x.com server=127.0.0.1:0", "127.0.0.1:0"},
        Bad{"provider=dns-srv domain=x.com server=127.0.0.1:x", "127.0.0.1:x"},
        Bad{"provider=dns-srv domain=x.com timeout=fast", "'fast'"},
        Bad{"provider=dns-srv domain=x.com timeout=5m", "'5m'"},
        Bad{"provider=dns-srv domain=x.com retries=-1", "retries='-1'"},
        Bad{"provider=dns-srv domain=x.com retries=11", "retries='11'"}}) {
    CAPTURE(bad.spec);
    auto r = Create(bad.spec);
    REQUIRE(r.status().IsInvalidArgument());
    CHECK(Mentions(r.status(), bad.mentions));
  }
}

}  // namespace
}  // namespace quorate::dns_srv
