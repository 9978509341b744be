// The dns-srv provider end to end: the real c-ares resolver against a real dnsmasq on 127.0.0.1 at a
// free high port, through the provider registry exactly as `quorate discover` builds it.
// Exits 77 (meson's "skipped") when dnsmasq is not installed.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "../support/ports.h"
#include "../support/programs.h"
#include "quorate/provider.h"

extern char** environ;

namespace quorate {
namespace {

// Records under quorate.test, one subdomain per case. Every address is loopback: nothing connects
// to them, they only have to exist.
const std::vector<std::string> kRecords = {
    // http only
    "--srv-host=_etcd-server._tcp.http.quorate.test,etcd-0.http.quorate.test,2380",
    "--srv-host=_etcd-server._tcp.http.quorate.test,etcd-1.http.quorate.test,2380",
    "--host-record=etcd-0.http.quorate.test,127.0.0.1",
    "--host-record=etcd-1.http.quorate.test,127.0.0.1",
    // https only
    "--srv-host=_etcd-server-ssl._tcp.https.quorate.test,etcd-0.https.quorate.test,2380",
    "--host-record=etcd-0.https.quorate.test,127.0.0.1",
    // both: etcd-0 in both, etcd-1 https only, etcd-2 http only and IPv6 only
    "--srv-host=_etcd-server-ssl._tcp.both.quorate.test,etcd-0.both.quorate.test,2380",
    "--srv-host=_etcd-server-ssl._tcp.both.quorate.test,etcd-1.both.quorate.test,2380",
    "--srv-host=_etcd-server._tcp.both.quorate.test,etcd-0.both.quorate.test,2380",
    "--srv-host=_etcd-server._tcp.both.quorate.test,etcd-2.both.quorate.test,2380",
    "--host-record=etcd-0.both.quorate.test,127.0.0.1",
    "--host-record=etcd-1.both.quorate.test,127.0.0.1",
    "--host-record=etcd-2.both.quorate.test,::1",
    // a suffix (--discovery-srv-name prod) beside unsuffixed records it must not read
    "--srv-host=_etcd-server-ssl-prod._tcp.suffix.quorate.test,prod-0.suffix.quorate.test,2380",
    "--srv-host=_etcd-server-ssl._tcp.suffix.quorate.test,other-0.suffix.quorate.test,2380",
    "--host-record=prod-0.suffix.quorate.test,127.0.0.1",
    "--host-record=other-0.suffix.quorate.test,127.0.0.1",
    // a service name of one's own
    "--srv-host=_db-ssl._tcp.svc.quorate.test,db-0.svc.quorate.test,2380",
    "--host-record=db-0.svc.quorate.test,127.0.0.1",
    // a target without an address
    "--srv-host=_etcd-server._tcp.ghost.quorate.test,etcd-0.ghost.quorate.test,2380",
    "--srv-host=_etcd-server._tcp.ghost.quorate.test,etcd-1.ghost.quorate.test,2380",
    "--host-record=etcd-0.ghost.quorate.test,127.0.0.1",
    // RFC 2782's "no service here" target
    "--srv-host=_etcd-server-ssl._tcp.dot.quorate.test,.,2380",
    // one member name from two hosts
    "--srv-host=_etcd-server._tcp.clash.quorate.test,etcd-0.a.clash.quorate.test,2380",
    "--srv-host=_etcd-server._tcp.clash.quorate.test,etcd-0.b.clash.quorate.test,2380",
    "--host-record=etcd-0.a.clash.quorate.test,127.0.0.1",
    "--host-record=etcd-0.b.clash.quorate.test,127.0.0.1",
};

// dnsmasq in the foreground (-k), stopped with SIGTERM when the tests end.
class Dnsmasq {
 public:
  // Retries with another port when the one picked was taken in between.
  bool Start(const std::string& binary) {
    for (int attempt = 0; attempt < 5; ++attempt) {
      port_ = FreePort("127.0.0.1", SOCK_DGRAM);
      if (Spawn(binary)) return true;
    }
    return false;
  }

  void Stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  int port() const { return port_; }

 private:
  bool Spawn(const std::string& binary) {
    std::vector<std::string> args = {
        binary, "-k", "--conf-file=/dev/null", "--no-resolv", "--no-hosts", "--bind-interfaces",
        "--listen-address=127.0.0.1", fmt::format("--port={}", port_),
        // Without --local, unknown names under the domain would get REFUSED instead of NXDOMAIN.
        "--local=/quorate.test/", "--log-facility=-",
        // No /var/run/dnsmasq.pid (as root): dnsmasqs side by side race on it, and the loser exits.
        "--pid-file"};
    args.insert(args.end(), kRecords.begin(), kRecords.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);

    char log_path[] = "/tmp/quorate-dnsmasq-XXXXXX";
    int log_fd = mkstemp(log_path);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, log_fd, STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, log_fd, STDERR_FILENO);
    int err = posix_spawn(&pid_, binary.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(log_fd);
    if (err != 0) {
      std::fprintf(stderr, "starting %s: %s\n", binary.c_str(), std::strerror(err));
      std::exit(1);
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline) {
      if (TcpAnswers(port_)) {
        unlink(log_path);
        return true;
      }
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::ifstream log(log_path);
    std::fprintf(stderr, "dnsmasq on 127.0.0.1:%d did not come up:\n%s\n", port_,
                 std::string(std::istreambuf_iterator<char>(log), {}).c_str());
    unlink(log_path);
    Stop();
    return false;
  }

  pid_t pid_ = -1;
  int port_ = 0;
};

Dnsmasq* g_dns = nullptr;

Result<std::vector<Member>> Discover(const std::string& keys, int port) {
  auto spec = ParseDiscoverySpec(
      fmt::format("provider=dns-srv server=127.0.0.1:{} timeout=500ms retries=1 {}", port, keys));
  REQUIRE(spec.ok());
  auto provider = ProviderRegistry::Get().Create(*spec);
  REQUIRE(provider.ok());
  return (*provider)->Discover();
}

Result<std::vector<Member>> Discover(const std::string& keys) { return Discover(keys, g_dns->port()); }

bool Mentions(const Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

using Urls = std::vector<std::string>;

TEST_CASE("dnsmasq: http records only") {
  auto members = Discover("domain=http.quorate.test");
  REQUIRE_MESSAGE(members.ok(), members.status().message());
  REQUIRE(members->size() == 2);
  CHECK((*members)[0] ==
        Member{"etcd-0", {"http://etcd-0.http.quorate.test:2380"}, {"http://etcd-0.http.quorate.test:2379"}});
  CHECK((*members)[1].name == "etcd-1");
}

TEST_CASE("dnsmasq: https records only") {
  auto members = Discover("domain=https.quorate.test");
  REQUIRE_MESSAGE(members.ok(), members.status().message());
  REQUIRE(members->size() == 1);
  CHECK((*members)[0] == Member{"etcd-0",
                                {"https://etcd-0.https.quorate.test:2380"},
                                {"https://etcd-0.https.quorate.test:2379"}});
}

TEST_CASE("dnsmasq: both schemes merged, an IPv6-only target resolves") {
  auto members = Discover("domain=both.quorate.test");
  REQUIRE_MESSAGE(members.ok(), members.status().message());
  REQUIRE(members->size() == 3);
  CHECK((*members)[0].peer_urls ==
        Urls{"http://etcd-0.both.quorate.test:2380", "https://etcd-0.both.quorate.test:2380"});
  CHECK((*members)[1].peer_urls == Urls{"https://etcd-1.both.quorate.test:2380"});
  CHECK((*members)[2].peer_urls == Urls{"http://etcd-2.both.quorate.test:2380"});
}

TEST_CASE("dnsmasq: a suffix reads only its own records") {
  auto members = Discover("domain=suffix.quorate.test name=prod");
  REQUIRE_MESSAGE(members.ok(), members.status().message());
  REQUIRE(members->size() == 1);
  CHECK((*members)[0].name == "prod-0");
  CHECK((*members)[0].peer_urls == Urls{"https://prod-0.suffix.quorate.test:2380"});
}

TEST_CASE("dnsmasq: another service name") {
  auto members = Discover("domain=svc.quorate.test service=db");
  REQUIRE_MESSAGE(members.ok(), members.status().message());
  REQUIRE(members->size() == 1);
  CHECK((*members)[0].peer_urls == Urls{"https://db-0.svc.quorate.test:2380"});
}

TEST_CASE("dnsmasq: a target without an address is a runtime failure (retried), named") {
  auto members = Discover("domain=ghost.quorate.test");
  REQUIRE(members.status().IsUnavailable());
  CHECK(Mentions(members.status(), "etcd-1.ghost.quorate.test"));
  CHECK(Mentions(members.status(), "_etcd-server._tcp.ghost.quorate.test"));
}

TEST_CASE("dnsmasq: the '.' target is a runtime failure") {
  auto members = Discover("domain=dot.quorate.test");
  REQUIRE(members.status().IsUnavailable());
  CHECK(Mentions(members.status(), "_etcd-server-ssl._tcp.dot.quorate.test"));
}

TEST_CASE("dnsmasq: one member name from two hosts is a runtime failure") {
  auto members = Discover("domain=clash.quorate.test");
  REQUIRE(members.status().IsUnavailable());
  CHECK(Mentions(members.status(), "etcd-0.a.clash.quorate.test"));
  CHECK(Mentions(members.status(), "etcd-0.b.clash.quorate.test"));
}

TEST_CASE("dnsmasq: no records at all is NotFound, naming both record names") {
  auto members = Discover("domain=empty.quorate.test");
  REQUIRE(members.status().IsNotFound());
  CHECK(Mentions(members.status(), "_etcd-server-ssl._tcp.empty.quorate.test"));
  CHECK(Mentions(members.status(), "_etcd-server._tcp.empty.quorate.test"));
}

// Each try waits `timeout`, doubled per retry by c-ares: 200ms + 400ms with retries=1.
TEST_CASE("no DNS server on the port: Unavailable within the timeout, naming server and record") {
  int port = FreePort("127.0.0.1", SOCK_DGRAM);
  auto start = std::chrono::steady_clock::now();
  auto spec = ParseDiscoverySpec(fmt::format(
      "provider=dns-srv domain=http.quorate.test server=127.0.0.1:{} timeout=200ms retries=1", port));
  REQUIRE(spec.ok());
  auto provider = ProviderRegistry::Get().Create(*spec);
  REQUIRE(provider.ok());
  auto members = (*provider)->Discover();
  auto elapsed = std::chrono::steady_clock::now() - start;
  REQUIRE(members.status().IsUnavailable());
  CHECK(Mentions(members.status(), fmt::format("127.0.0.1:{}", port)));
  CHECK(Mentions(members.status(), "_etcd-server-ssl._tcp.http.quorate.test"));
  CHECK(elapsed < std::chrono::seconds(2));
}

TEST_CASE("a DNS server that never answers: Unavailable after the timeout") {
  SilentListener silent("127.0.0.1", SOCK_DGRAM);
  int port = silent.port();
  auto spec = ParseDiscoverySpec(fmt::format(
      "provider=dns-srv domain=http.quorate.test server=127.0.0.1:{} timeout=200ms retries=1", port));
  REQUIRE(spec.ok());
  auto provider = ProviderRegistry::Get().Create(*spec);
  REQUIRE(provider.ok());
  auto start = std::chrono::steady_clock::now();
  auto members = (*provider)->Discover();
  auto elapsed = std::chrono::steady_clock::now() - start;
  REQUIRE(members.status().IsUnavailable());
  CHECK(Mentions(members.status(), fmt::format("127.0.0.1:{}", port)));
  CHECK(Mentions(members.status(), "_etcd-server-ssl._tcp.http.quorate.test"));
  CHECK(elapsed >= std::chrono::milliseconds(200));
  CHECK(elapsed < std::chrono::seconds(2));
  MESSAGE("gave up after " << std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count()
                           << " ms");
}

}  // namespace
}  // namespace quorate

int main(int argc, char** argv) {
  std::string binary = quorate::FindProgram("dnsmasq", "/usr/sbin:/sbin");
  if (binary.empty()) {
    std::printf(
        "SKIP: dnsmasq not found on PATH, /usr/sbin or /sbin (Debian: apt-get install dnsmasq-base)\n");
    return 77;
  }
  quorate::Dnsmasq dns;
  if (!dns.Start(binary)) return 1;
  quorate::g_dns = &dns;
  doctest::Context context(argc, argv);
  int rc = context.run();
  dns.Stop();
  return rc;
}
