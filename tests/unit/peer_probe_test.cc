#include <doctest/doctest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include <httplib.h>

#include "etcd/peer_probe.h"
#include "../support/ports.h"
#include "../support/test_certs.h"

namespace quorate {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

struct Answer {
  int status = 200;
  std::string cluster_id = "2a";  // empty: no header at all
  std::string body = R"([{"id":7,"peerURLs":["http://127.0.0.1:2380"]}])";
};

// A stand-in for an etcd peer endpoint on 127.0.0.1, port 0, answering what the test sets.
class FakePeer {
 public:
  explicit FakePeer(std::unique_ptr<httplib::Server> server = std::make_unique<httplib::Server>())
      : server_(std::move(server)) {
    server_->Get("/members", [this](const httplib::Request&, httplib::Response& res) {
      std::lock_guard lock(mu_);
      res.status = answer_.status;
      if (!answer_.cluster_id.empty()) res.set_header("X-Etcd-Cluster-Id", answer_.cluster_id);
      res.set_content(answer_.body, "application/json");
    });
    port_ = server_->bind_to_any_port("127.0.0.1");
    REQUIRE(port_ > 0);
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    // stop() is a no-op until the server runs, so the destructor could otherwise never join.
    while (!server_->is_running()) std::this_thread::sleep_for(milliseconds(2));
  }
  ~FakePeer() { Stop(); }

  void Set(Answer answer) {
    std::lock_guard lock(mu_);
    answer_ = std::move(answer);
  }
  void Stop() {
    if (!thread_.joinable()) return;
    server_->stop();
    thread_.join();
  }
  std::string Url(const std::string& scheme = "http") const {
    return scheme + "://127.0.0.1:" + std::to_string(port_);
  }

 private:
  std::unique_ptr<httplib::Server> server_;
  std::mutex mu_;
  Answer answer_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace

TEST_CASE("etcd's GET /members answer is parsed and checked") {
  // The bytes etcd 3.4.23 sends for a started member, with an ID above 2^63, and a learner that
  // has not started (etcd omits its name and clientURLs).
  auto view = ParseMembersAnswer(
      R"([{"id":13195394291058371180,"peerURLs":["http://127.0.0.1:2380"],"name":"infra1",)"
      R"("clientURLs":["http://127.0.0.1:2379"]},)"
      R"({"id":5,"peerURLs":["http://127.0.0.2:2380","http://10.0.0.2:2380"],"isLearner":true}])",
      "1c45a069f3a1d796", "src");
  REQUIRE_MESSAGE(view.ok(), view.status().message());
  CHECK(view->cluster_id == 0x1c45a069f3a1d796ULL);
  REQUIRE(view->members.size() == 2);
  CHECK(view->members[0].id == 13195394291058371180ULL);
  CHECK(view->members[0].name == "infra1");
  CHECK(view->members[0].client_urls == std::vector<std::string>{"http://127.0.0.1:2379"});
  CHECK(view->members[0].started());
  CHECK_FALSE(view->members[0].is_learner);
  CHECK(view->members[1].id == 5);
  CHECK(view->members[1].name.empty());
  CHECK(view->members[1].peer_urls.size() == 2);
  CHECK_FALSE(view->members[1].started());
  CHECK(view->members[1].is_learner);

  CHECK(ParseMembersAnswer(R"([{"id":18446744073709551615,"peerURLs":["http://a:1"],"clientURLs":null}])",
                           "ffffffffffffffff", "src")
            ->members[0]
            .id == UINT64_MAX);

  struct Case {
    std::string body;
    std::string header;
    std::string says;
  };
  for (const Case& c : std::initializer_list<Case>{
           {"[]", "1", "no members"},
           {"not json", "1", "not JSON"},
           {R"({"id":1})", "1", "not a list of members"},
           {R"([7])", "1", "member #0: is a JSON number"},
           {R"([{"id":-1,"peerURLs":["http://a:1"]}])", "1", "id -1 is not an unsigned integer"},
           {R"([{"id":1.5,"peerURLs":["http://a:1"]}])", "1", "id 1.5 is not"},
           {R"([{"id":"1","peerURLs":["http://a:1"]}])", "1", R"(id "1" is not)"},
           {R"([{"id":18446744073709551616,"peerURLs":["http://a:1"]}])", "1", "is not an unsigned"},
           {R"([{"peerURLs":["http://a:1"]}])", "1", "member #0: no id"},
           {R"([{"id":1,"peerURLs":"http://a:1"}])", "1", "peerURLs is string, not a list"},
           {R"([{"id":1,"peerURLs":[2380]}])", "1", "peerURLs holds number, not a string"},
           // What a hostile peer would use to write lines of its own into etcd.env or a log.
           {R"([{"id":1,"peerURLs":["http://a:1"],"name":"x\nETCD_FORCE_NEW_CLUSTER=true"}])", "1",
            "member #0: name 'x\\nETCD_FORCE_NEW_CLUSTER=true' holds a control character"},
           {R"([{"id":1,"peerURLs":["http://a:1"],"name":"a=http://b:2,c"}])", "1", "holds '=' or ','"},
           {R"([{"id":1,"peerURLs":["http://a:1"],"name":"\u001b[2J"}])", "1", "'\\x1b[2J' holds a control"},
           {"[{\"id\":1,\"peerURLs\":[\"http://a:1\"],\"name\":\"\xff\"}]", "1", "not JSON"},
           {R"([{"id":1,"peerURLs":["http://[::1\nETCD_X=1]:2380"]}])", "1", "the host in brackets is not an IPv6"},
           {R"([{"id":1,"peerURLs":["http://a:1\nETCD_X=1"]}])", "1", "bad URL 'http://a:1\\nETCD_X=1'"},
           {R"([{"id":1,"peerURLs":["http://a:1"],"clientURLs":["http://a:1/x"]}])", "1", "clientURLs: bad URL"},
           {R"([{"id":1,"peerURLs":[]}])", "1", "peerURLs is empty"},
           {R"([{"id":1}])", "1", "no peerURLs"},
           {R"([{"id":1,"peerURLs":["http://a:1"],"clientURLs":{}}])", "1", "clientURLs is object"},
           {R"([{"id":1,"peerURLs":["http://a:1"],"name":3}])", "1", "name is number"},
           {R"([{"id":1,"peerURLs":["http://a:1"],"isLearner":"yes"}])", "1", "isLearner is string"},
           {R"([{"id":1,"peerURLs":["http://a:1"]},{"id":1,"peerURLs":["http://b:1"]}])", "1",
            "member #1: id 1 appears twice"},
           {R"([{"id":1,"peerURLs":["http://a:1"]}])", "", "no X-Etcd-Cluster-ID header"},
           {R"([{"id":1,"peerURLs":["http://a:1"]}])", "zz", "header 'zz' is not a hex ID"},
           {R"([{"id":1,"peerURLs":["http://a:1"]}])", "10000000000000000", "is not a hex ID"},
       }) {
    INFO(c.body, " with cluster ID header '", c.header, "'");
    auto bad = ParseMembersAnswer(c.body, c.header, "http://x:2380/members");
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.status().IsInvalidArgument());
    CHECK(bad.status().message().find("http://x:2380/members") != std::string::npos);
    CHECK_MESSAGE(bad.status().message().find(c.says) != std::string::npos, bad.status().message());
  }
}

TEST_CASE("probing a peer URL over HTTP") {
  FakePeer peer;
  std::string url = peer.Url();

  SUBCASE("a good answer, IDs above 2^63 included") {
    peer.Set({200, "8e9e05c52164694d",
              R"([{"id":10276657743932975437,"peerURLs":["http://127.0.0.1:2380"],"name":"n1",)"
              R"("clientURLs":["http://127.0.0.1:2379"]},)"
              R"({"id":9372538179322589801,"peerURLs":["http://127.0.0.2:2380"]}])"});
    auto view = ProbeMembers(url, {}, seconds(2));
    REQUIRE_MESSAGE(view.ok(), view.status().message());
    CHECK(view->cluster_id == 0x8e9e05c52164694dULL);
    REQUIRE(view->members.size() == 2);
    CHECK(view->members[0].id == 10276657743932975437ULL);
    CHECK(view->members[0].started());
    CHECK(view->members[1].id == 9372538179322589801ULL);
    CHECK_FALSE(view->members[1].started());
  }
  SUBCASE("answers that are not etcd's name the URL and the fault") {
    struct Case {
      Answer answer;
      std::string says;
    };
    for (const Case& c : std::initializer_list<Case>{
             {{200, "", R"([{"id":7,"peerURLs":["http://127.0.0.1:2380"]}])"}, "no X-Etcd-Cluster-ID header"},
             {{200, "not-hex", R"([{"id":7,"peerURLs":["http://127.0.0.1:2380"]}])"}, "'not-hex' is not a hex ID"},
             {{200, "2a", "<html>hello</html>"}, "body is not JSON"},
             {{200, "2a", R"([{"id":"7","peerURLs":["http://127.0.0.1:2380"]}])"}, "is not an unsigned integer"},
             {{200, "2a", R"([{"id":7,"peerURLs":[1]}])"}, "peerURLs holds number"},
             {{200, "2a", R"([{"id":7,"peerURLs":["http://127.0.0.1:2380"],"name":"a\r\nb"}])"}, "control character"},
             {{500, "2a", "boom"}, "answered HTTP 500"},
             {{404, "", "404 page not found"}, "answered HTTP 404"},
         }) {
      INFO(c.says);
      peer.Set(c.answer);
      auto bad = ProbeMembers(url, {}, seconds(2));
      REQUIRE_FALSE(bad.ok());
      CHECK(bad.status().IsInvalidArgument());
      CHECK(bad.status().message().find(url + "/members") != std::string::npos);
      CHECK_MESSAGE(bad.status().message().find(c.says) != std::string::npos, bad.status().message());
    }
  }
  SUBCASE("connection refused") {
    peer.Stop();
    auto start = Clock::now();
    auto down = ProbeMembers(url, {}, milliseconds(500));
    CHECK(Clock::now() - start < seconds(30));
    CHECK(down.status().IsUnavailable());
    CHECK(down.status().message() == url + "/members not answering: cannot connect (refused or unreachable)");
  }
  SUBCASE("not a peer URL") {
    auto bad = ProbeMembers("127.0.0.1:2380", {}, milliseconds(500));
    CHECK(bad.status().IsInvalidArgument());
    CHECK(bad.status().message().find("127.0.0.1:2380") != std::string::npos);
  }
}

TEST_CASE("probing a peer that accepts but never answers gives up after the timeout") {
  SilentListener listener;
  const std::string url = listener.url();
  auto start = Clock::now();
  auto silent = ProbeMembers(url, {}, milliseconds(300));
  CHECK(Clock::now() - start < seconds(30));
  CHECK(silent.status().IsUnavailable());
  CHECK(silent.status().message() ==
        url + "/members not answering: no answer (connection closed, or silent for 300 ms)");
}

TEST_CASE("probing a peer URL over mutual TLS") {
  TestCerts certs;
  if (!certs.ok()) return;
  FakePeer peer(std::make_unique<httplib::SSLServer>(certs.Path("peer.crt").c_str(), certs.Path("peer.key").c_str(),
                                                     certs.Path("ca.crt").c_str()));
  std::string url = peer.Url("https");

  auto view = ProbeMembers(url, certs.Peer(), seconds(20));
  REQUIRE_MESSAGE(view.ok(), view.status().message());
  CHECK(view->cluster_id == 0x2a);

  struct Case {
    std::string what;
    std::string url;
    TlsFiles tls;
    std::string says;
    // A server that presented a certificate answered: something runs there, so it is not the
    // "nothing answers" that lets a new cluster start. A closed connection is.
    bool answered;
  };
  for (const Case& c : {
           Case{"server certificate from a CA we do not trust", url,
                {certs.Path("peer.crt"), certs.Path("peer.key"), certs.Path("other-ca.crt"), false},
                "answered, but its TLS certificate is not trusted", true},
           Case{"no CA: the system roots do not know ours", url,
                {certs.Path("peer.crt"), certs.Path("peer.key"), "", false},
                "answered, but its TLS certificate is not trusted", true},
           Case{"no client certificate", url, {"", "", certs.Path("ca.crt"), false}, "; our TLS certificate refused?",
                false},
           Case{"plain http to a TLS peer", peer.Url("http"), {}, "no answer", false},
       }) {
    INFO(c.what);
    // Every case ends on an answer or a closed connection, never on the timeout: a long one only
    // keeps a loaded machine (loading the system's roots, a slow handshake) from failing it.
    auto refused = ProbeMembers(c.url, c.tls, seconds(20));
    CHECK(refused.status().IsUnavailable() == !c.answered);
    CHECK(refused.status().IsInvalidArgument() == c.answered);
    CHECK(refused.status().message().find(c.url + "/members") == 0);
    CHECK_MESSAGE(refused.status().message().find(c.says) != std::string::npos, refused.status().message());
  }

  TlsFiles no_key = certs.Peer();
  no_key.key_file = certs.Path("no-such.key");
  auto bad = ProbeMembers(url, no_key, seconds(2));
  CHECK(bad.status().IsInvalidArgument());
  CHECK(bad.status().message().find("no-such.key") != std::string::npos);
  TlsFiles no_ca = certs.Peer();
  no_ca.trusted_ca_file = certs.Path("no-such-ca.crt");
  bad = ProbeMembers(url, no_ca, seconds(2));
  CHECK(bad.status().IsInvalidArgument());
  CHECK(bad.status().message().find("no-such-ca.crt") != std::string::npos);
}

}  // namespace quorate
