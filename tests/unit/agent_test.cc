#include <doctest/doctest.h>

#include <atomic>
#include <thread>

#include <httplib.h>

#include "quorate/agent.h"
#include "quorate/peer_probe.h"

namespace quorate {

TEST_CASE("an agent tells its peers its state, as it changes") {
  std::atomic<DataState> data{DataState::kEmpty};
  auto server = AgentServer::Start("127.0.0.1:0", {}, [&] {
    return AgentState{{"n1", {"http://127.0.0.1:2380"}, {}}, data.load(), "tok", 0xabc, 0x1, 3, "n1=..."};
  });
  REQUIRE(server.ok());
  std::string target = "127.0.0.1:" + std::to_string((*server)->port());
  AgentReport r = AskAgent(target, "n2", {}, std::chrono::seconds(2));
  REQUIRE(r.reachable);
  CHECK(r.data_state == DataState::kEmpty);
  CHECK(r.token == "tok");
  CHECK(r.expected_cluster_id == 0xabc);
  data = DataState::kRunning;
  CHECK(AskAgent(target, "n2", {}, std::chrono::seconds(2)).data_state == DataState::kRunning);

  server->reset();
  AgentReport gone = AskAgent(target, "n2", {}, std::chrono::milliseconds(300));
  CHECK_FALSE(gone.reachable);
  CHECK(gone.error.find(target) != std::string::npos);
}

TEST_CASE("an agent that cannot listen says where") {
  auto first = AgentServer::Start("127.0.0.1:0", {}, [] { return AgentState{}; });
  REQUIRE(first.ok());
  std::string taken = "127.0.0.1:" + std::to_string((*first)->port());
  auto second = AgentServer::Start(taken, {}, [] { return AgentState{}; });
  CHECK_FALSE(second.ok());
  CHECK(second.status().message().find(taken) != std::string::npos);
}

TEST_CASE("agent targets follow the peer URL host") {
  CHECK(AgentTarget(*ParseUrl("http://etcd-0.etcd:2380"), 2382) == "etcd-0.etcd:2382");
  CHECK(AgentTarget(*ParseUrl("https://[::1]:2380"), 9) == "[::1]:9");
}

TEST_CASE("etcd's GET /members answer is parsed and checked") {
  // The exact bytes etcd 3.4.23 sends, with an ID above 2^63.
  auto view = ParseMembersAnswer(
      R"([{"id":13195394291058371180,"peerURLs":["http://127.0.0.1:2380"],"name":"infra1","clientURLs":["http://127.0.0.1:2379"]},)"
      R"({"id":5,"peerURLs":["http://127.0.0.2:2380"],"isLearner":true}])",
      "1c45a069f3a1d796", "src");
  REQUIRE(view.ok());
  CHECK(view->cluster_id == 0x1c45a069f3a1d796ULL);
  CHECK(view->members[0].id == 13195394291058371180ULL);
  CHECK(view->members[0].started());
  CHECK_FALSE(view->members[1].started());
  CHECK(view->members[1].is_learner);

  for (auto [body, header] : std::initializer_list<std::pair<const char*, const char*>>{
           {"[]", "1"},
           {"not json", "1"},
           {R"({"id":1})", "1"},
           {R"([{"id":-1,"peerURLs":["http://a:1"]}])", "1"},
           {R"([{"id":"1","peerURLs":["http://a:1"]}])", "1"},
           {R"([{"id":1,"peerURLs":"http://a:1"}])", "1"},
           {R"([{"id":1}])", "1"},
           {R"([{"id":1,"peerURLs":["http://a:1"]}])", ""},
           {R"([{"id":1,"peerURLs":["http://a:1"]}])", "zz"}}) {
    CAPTURE(body);
    auto bad = ParseMembersAnswer(body, header, "http://x:2380/members");
    CHECK(bad.status().IsInvalidArgument());
    CHECK(bad.status().message().find("http://x:2380/members") != std::string::npos);
  }
}

TEST_CASE("probing a peer URL over HTTP") {
  httplib::Server server;
  std::atomic<int> mode{0};
  server.Get("/members", [&](const httplib::Request&, httplib::Response& res) {
    if (mode == 1) {
      res.status = 500;
      return;
    }
    res.set_header("X-Etcd-Cluster-ID", "2a");
    res.set_content(R"([{"id":7,"peerURLs":["http://127.0.0.1:2380"]}])", "application/json");
  });
  int port = server.bind_to_any_port("127.0.0.1");
  std::thread t([&] { server.listen_after_bind(); });
  while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::string url = "http://127.0.0.1:" + std::to_string(port);

  auto view = ProbeMembers(url, {}, std::chrono::seconds(2));
  REQUIRE(view.ok());
  CHECK(view->cluster_id == 0x2a);
  mode = 1;
  CHECK(ProbeMembers(url, {}, std::chrono::seconds(2)).status().IsInvalidArgument());
  server.stop();
  t.join();
  auto down = ProbeMembers(url, {}, std::chrono::milliseconds(500));
  CHECK(down.status().IsUnavailable());
  CHECK(down.status().message().find(url) != std::string::npos);
}

}  // namespace quorate
