#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>

#include "agent/agent.h"
#include "../support/test_certs.h"

namespace quorate {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

std::unique_ptr<AgentServer> MustStart(const TlsFiles& tls, std::function<AgentState()> state) {
  auto server = AgentServer::Start("127.0.0.1:0", tls, std::move(state));
  REQUIRE_MESSAGE(server.ok(), server.status().message());
  return std::move(*server);
}

std::string Local(int port) { return "127.0.0.1:" + std::to_string(port); }

AgentState SomeState() {
  return AgentState{{"n1", {"http://127.0.0.1:2380"}, {"http://127.0.0.1:2379"}},
                    DataState::kEmpty,
                    "tok",
                    0xfedcba9876543210ULL,  // above 2^63: the uint64 survives the wire
                    0x1,
                    3,
                    "n1=http://127.0.0.1:2380"};
}

// A TCP port that accepts connections (the kernel completes them) but never says a word.
class SilentListener {
 public:
  SilentListener() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(listen(fd_, 16) == 0);
    socklen_t len = sizeof addr;
    REQUIRE(getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port_ = ntohs(addr.sin_port);
  }
  ~SilentListener() { close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

}  // namespace

TEST_CASE("an agent keeps only what its log said: no WAL yet is not past, an unreadable one is past for one answer") {
  AgentState kept = SomeState();
  kept.data_state = DataState::kRunning;

  // etcd just launched on empty data: no WAL file yet, no entry.
  CHECK_FALSE(AnswerWithLog(kept, Status::NotFound("member/wal holds no WAL file")).log_past_bootstrap);
  CHECK_FALSE(kept.log_past_bootstrap);

  // A read that fails now makes a peer wait, but the next read decides again.
  CHECK(AnswerWithLog(kept, Status::DataLoss("cannot read 0000.wal")).log_past_bootstrap);
  CHECK_FALSE(kept.log_past_bootstrap);
  CHECK_FALSE(AnswerWithLog(kept, false).log_past_bootstrap);

  // A leader's entry, once read, stays: a log only grows.
  CHECK(AnswerWithLog(kept, true).log_past_bootstrap);
  CHECK(kept.log_past_bootstrap);
  CHECK(AnswerWithLog(kept, false).log_past_bootstrap);
}

TEST_CASE("an agent tells its peers its state, as it changes") {
  std::mutex mu;
  AgentState state = SomeState();
  auto server = MustStart({}, [&] {
    std::lock_guard lock(mu);
    return state;
  });
  std::string target = Local(server->port());

  AgentReport r = AskAgent(target, "n2", {}, seconds(2));
  REQUIRE_MESSAGE(r.reachable, r.error);
  CHECK(r.error.empty());
  CHECK(r.data_state == DataState::kEmpty);
  CHECK(r.token == "tok");
  CHECK(r.expected_cluster_id == 0xfedcba9876543210ULL);
  CHECK_FALSE(r.log_past_bootstrap);

  {
    std::lock_guard lock(mu);
    state.data_state = DataState::kRunning;
    state.token = "tok2";
    state.cluster_id = 0x2a;
    state.log_past_bootstrap = true;
  }
  r = AskAgent(target, "n2", {}, seconds(2));
  REQUIRE(r.reachable);
  CHECK(r.data_state == DataState::kRunning);
  CHECK(r.token == "tok2");
  CHECK(r.expected_cluster_id == 0x2a);
  CHECK(r.log_past_bootstrap);

  for (DataState s : {DataState::kHasData, DataState::kUnknown}) {
    {
      std::lock_guard lock(mu);
      state.data_state = s;
    }
    CHECK(AskAgent(target, "n2", {}, seconds(2)).data_state == s);
  }
}

TEST_CASE("an agent that is not there is a report, within the timeout") {
  SUBCASE("nothing listens") {
    int port = MustStart({}, [] { return AgentState{}; })->port();  // freed again at once
    auto start = Clock::now();
    AgentReport r = AskAgent(Local(port), "n2", {}, milliseconds(300));
    CHECK(Clock::now() - start < seconds(10));
    CHECK_FALSE(r.reachable);
    CHECK(r.error == "agent " + Local(port) + " not answering: Connection refused");
  }
  SUBCASE("something listens but never answers") {
    SilentListener silent;
    auto start = Clock::now();
    AgentReport r = AskAgent(Local(silent.port()), "n2", {}, milliseconds(300));
    auto took = Clock::now() - start;
    CHECK(took >= milliseconds(250));
    CHECK(took < seconds(10));
    CHECK_FALSE(r.reachable);
    CHECK(r.error == "agent " + Local(silent.port()) + " did not answer within 300 ms");
  }
  SUBCASE("not a target gRPC can resolve") {
    AgentReport r = AskAgent("no-such-host.invalid:2382", "n2", {}, milliseconds(300));
    CHECK_FALSE(r.reachable);
    CHECK(r.error.find("agent no-such-host.invalid:2382 not answering: ") == 0);
    CHECK(r.error.find('\n') == std::string::npos);
  }
}

TEST_CASE("an agent destroyed mid-call answers no more and does not hang its owner") {
  std::atomic<int> calls{0};
  std::promise<void> entered;
  std::atomic<bool> first{true};
  auto server = MustStart({}, [&] {
    ++calls;
    if (first.exchange(false)) {
      entered.set_value();
      // Longer than the shutdown grace: the destructor must cancel this call, not wait for it.
      std::this_thread::sleep_for(milliseconds(600));
    }
    return SomeState();
  });
  std::string target = Local(server->port());
  auto asking = std::async(std::launch::async, [&] { return AskAgent(target, "n2", {}, seconds(5)); });
  entered.get_future().wait();

  auto start = Clock::now();
  server.reset();
  CHECK(Clock::now() - start < seconds(4));
  AgentReport cut = asking.get();
  CHECK(Clock::now() - start < seconds(4));
  CHECK_FALSE(cut.reachable);
  CHECK(cut.error.find(target) != std::string::npos);

  int seen = calls.load();
  CHECK_FALSE(AskAgent(target, "n2", {}, milliseconds(300)).reachable);
  CHECK(calls.load() == seen);
}

TEST_CASE("an agent that cannot listen says where") {
  auto first = MustStart({}, [] { return AgentState{}; });
  std::string taken = Local(first->port());
  auto second = AgentServer::Start(taken, {}, [] { return AgentState{}; });
  REQUIRE_FALSE(second.ok());
  CHECK(second.status().IsUnavailable());
  CHECK(second.status().message().find(taken) != std::string::npos);

  for (std::string bad : {"127.0.0.1:notaport", "192.0.2.1:0"}) {  // 192.0.2.0/24 is never local
    INFO(bad);
    auto r = AgentServer::Start(bad, {}, [] { return AgentState{}; });
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find(bad) != std::string::npos);
  }
}

TEST_CASE("agent targets follow the peer URL host") {
  CHECK(AgentTarget(*ParseUrl("http://etcd-0.etcd:2380"), 2382) == "etcd-0.etcd:2382");
  CHECK(AgentTarget(*ParseUrl("https://10.0.0.7:2380"), 2382) == "10.0.0.7:2382");
  CHECK(AgentTarget(*ParseUrl("https://[::1]:2380"), 9) == "[::1]:9");
}

TEST_CASE("agents talk mTLS when peer TLS is configured") {
  TestCerts certs;
  if (!certs.ok()) return;
  auto server = MustStart(certs.Peer(), SomeState);
  std::string target = Local(server->port());

  AgentReport r = AskAgent(target, "n2", certs.Peer(), seconds(2));
  REQUIRE_MESSAGE(r.reachable, r.error);
  CHECK(r.token == "tok");

  struct Case {
    std::string what;
    TlsFiles tls;
    std::string says;
  };
  for (const Case& c : {
           Case{"plain text", {}, "not answering: "},
           Case{"no client certificate", {"", "", certs.Path("ca.crt"), false}, "not answering over TLS: "},
           Case{"client certificate from another CA",
                {certs.Path("stranger.crt"), certs.Path("stranger.key"), certs.Path("ca.crt"), false},
                "not answering over TLS: "},
           Case{"server certificate from a CA we do not trust",
                {certs.Path("peer.crt"), certs.Path("peer.key"), certs.Path("other-ca.crt"), false},
                "certificate verify failed"},
       }) {
    INFO(c.what);
    AgentReport refused = AskAgent(target, "n2", c.tls, seconds(2));
    CHECK_FALSE(refused.reachable);
    CHECK(refused.error.find("agent " + target) == 0);
    CHECK_MESSAGE(refused.error.find(c.says) != std::string::npos, refused.error);
  }

  SUBCASE("without client_cert_auth any client that trusts the server is answered") {
    auto open = MustStart(certs.Peer(false), SomeState);
    CHECK(AskAgent(Local(open->port()), "n2", {"", "", certs.Path("ca.crt"), false}, seconds(2)).reachable);
  }
  SUBCASE("unusable TLS files are named") {
    TlsFiles missing = certs.Peer();
    missing.key_file = certs.Path("no-such.key");
    auto bad = AgentServer::Start("127.0.0.1:0", missing, SomeState);
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.status().IsInvalidArgument());
    CHECK(bad.status().message().find("no-such.key") != std::string::npos);
    AgentReport cannot = AskAgent(target, "n2", missing, seconds(2));
    CHECK_FALSE(cannot.reachable);
    CHECK(cannot.error.find("no-such.key") != std::string::npos);

    auto no_cert = AgentServer::Start("127.0.0.1:0", {"", "", certs.Path("ca.crt"), false}, SomeState);
    CHECK(no_cert.status().IsInvalidArgument());
    auto no_ca = AgentServer::Start("127.0.0.1:0", {certs.Path("peer.crt"), certs.Path("peer.key"), "", true},
                                    SomeState);
    CHECK(no_ca.status().IsInvalidArgument());
  }
}

}  // namespace quorate
