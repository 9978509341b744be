#include <doctest/doctest.h>

#include <chrono>

#include <nlohmann/json.hpp>

#include "etcd/etcd_client.h"

namespace quorate {
namespace {

using std::chrono::milliseconds;

// An address nothing listens on: the calls below fail before anything is sent.
const std::string kIp = "127.0.3.1";

bool Has(const Status& s, const std::string& text) { return s.message().find(text) != std::string::npos; }

// The listing etcdctl 3.4.23 printed for a one-node cluster with a learner added and not started.
MemberListing Sample() {
  MemberListing l;
  l.cluster_id = 1786256734754960997ULL;
  l.answered_by = 12865618747661689239ULL;
  l.members.push_back({11313109264670483982ULL, "", {"http://127.0.3.2:2380"}, {}, true});
  l.members.push_back({12865618747661689239ULL, "n1", {"http://127.0.3.1:2380"}, {"http://127.0.3.1:2379"}, false});
  return l;
}

TEST_CASE("member list prints as etcdctl 3.4 does") {
  // Copied from `etcdctl member list` against etcd 3.4.23.
  CHECK(FormatMemberList(Sample(), OutputFormat::kSimple) ==
        "9d003cefd1dd660e, unstarted, , http://127.0.3.2:2380, , true\n"
        "b28bdc1605fb2197, started, n1, http://127.0.3.1:2380, http://127.0.3.1:2379, false\n");
  // Copied from `etcdctl member list -w table`.
  CHECK(FormatMemberList(Sample(), OutputFormat::kTable) ==
        "+------------------+-----------+------+-----------------------+-----------------------+------------+\n"
        "|        ID        |  STATUS   | NAME |      PEER ADDRS       |     CLIENT ADDRS      | IS LEARNER |\n"
        "+------------------+-----------+------+-----------------------+-----------------------+------------+\n"
        "| 9d003cefd1dd660e | unstarted |      | http://127.0.3.2:2380 |                       |       true |\n"
        "| b28bdc1605fb2197 |   started |   n1 | http://127.0.3.1:2380 | http://127.0.3.1:2379 |      false |\n"
        "+------------------+-----------+------+-----------------------+-----------------------+------------+\n");

  const std::string text = FormatMemberList(Sample(), OutputFormat::kJson);
  CHECK(text.find(R"("id": "9d003cefd1dd660e",
      "name": "",
      "peerURLs": [)") != std::string::npos);
  auto json = nlohmann::json::parse(text);
  CHECK(json["clusterID"] == "18ca0f0948b7f665");
  REQUIRE(json["members"].size() == 2);
  CHECK(json["members"][0] == nlohmann::json::parse(R"({"id":"9d003cefd1dd660e","name":"","isLearner":true,
      "peerURLs":["http://127.0.3.2:2380"],"clientURLs":[]})"));
  CHECK(json["members"][1]["id"] == "b28bdc1605fb2197");
  CHECK(json["members"][1]["clientURLs"] == nlohmann::json::array({"http://127.0.3.1:2379"}));

  MemberListing several = Sample();
  several.members.pop_back();
  several.members[0].peer_urls = {"http://a:2380", "https://b:2380"};
  CHECK(FormatMemberList(several, OutputFormat::kSimple) ==
        "9d003cefd1dd660e, unstarted, , http://a:2380,https://b:2380, , true\n");
}

TEST_CASE("etcd client options that cannot work are the error of every call, naming the input") {
  auto unix_socket = MakeEtcdClient({{"unix:///run/etcd.sock"}, {}, milliseconds(200)});
  auto list = unix_socket->MemberList();
  CHECK(list.status().IsInvalidArgument());
  CHECK_MESSAGE(Has(list.status(), "unix:///run/etcd.sock"), list.status().message());

  TlsFiles tls;
  tls.trusted_ca_file = "/nonexistent/quorate-ca.crt";
  auto no_ca = MakeEtcdClient({{"https://" + kIp + ":2379"}, tls, milliseconds(200)});
  Status put = no_ca->Put("k", "v");
  CHECK(put.IsInvalidArgument());
  CHECK_MESSAGE(Has(put, "/nonexistent/quorate-ca.crt"), put.message());

  auto none = MakeEtcdClient({{}, {}, milliseconds(200)});
  CHECK(none->MemberList().status().IsInvalidArgument());
}

}  // namespace
}  // namespace quorate
