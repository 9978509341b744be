#include "cli/output.h"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "core/json.h"

namespace quorate {
namespace {

// The listing etcdctl 3.4.23 printed for a one-node cluster with a learner added and not started.
MemberListing Sample() {
  MemberListing l;
  l.cluster_id = 1786256734754960997ULL;
  l.answered_by = 12865618747661689239ULL;
  l.members.push_back({11313109264670483982ULL, "", {"http://127.0.3.2:2380"}, {}, true});
  l.members.push_back({12865618747661689239ULL, "n1", {"http://127.0.3.1:2380"}, {"http://127.0.3.1:2379"}, false});
  return l;
}

}  // namespace

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

TEST_CASE("member list adds each member's peer certificate expiry when the members have https peer URLs") {
  const std::vector<std::optional<WallTime>> expiry = {std::nullopt,
                                                       std::chrono::system_clock::from_time_t(1'800'000'000)};
  CHECK(FormatMemberList(Sample(), OutputFormat::kSimple, &expiry) ==
        "9d003cefd1dd660e, unstarted, , http://127.0.3.2:2380, , true, -\n"
        "b28bdc1605fb2197, started, n1, http://127.0.3.1:2380, http://127.0.3.1:2379, false, 2027-01-15T08:00:00Z\n");
  const std::string table = FormatMemberList(Sample(), OutputFormat::kTable, &expiry);
  CHECK(table.find("| IS LEARNER | PEER CERT NOT AFTER  |") != std::string::npos);
  CHECK(table.find("|      false | 2027-01-15T08:00:00Z |") != std::string::npos);
  auto json = nlohmann::json::parse(FormatMemberList(Sample(), OutputFormat::kJson, &expiry));
  CHECK(json["members"][0]["peerCertNotAfter"].is_null());
  CHECK(json["members"][1]["peerCertNotAfter"] == "2027-01-15T08:00:00Z");
  CHECK(FormatMemberList(Sample(), OutputFormat::kJson).find("peerCertNotAfter") == std::string::npos);
}

TEST_CASE("JSON output never throws: bytes that are not UTF-8 come out as U+FFFD") {
  const std::string bad = "n\xff";
  CHECK(JsonText(nlohmann::json{{"name", bad}}) == "{\"name\":\"n\xef\xbf\xbd\"}");

  MemberListing listing = Sample();
  listing.members[1].name = bad;
  CHECK(nlohmann::json::parse(FormatMemberList(listing, OutputFormat::kJson))["members"][1]["name"] == "n\xef\xbf\xbd");

  InitOutcome outcome;
  outcome.decision.reason = "peer said " + bad;
  CHECK(nlohmann::json::parse(FormatInitOutcome(outcome, OutputFormat::kJson))["reason"] == "peer said n\xef\xbf\xbd");

  std::ostringstream out;
  RemovalPrinter printer(OutputFormat::kJson, out);
  printer.NotAMember(0xc1, bad);
  printer.Handled(0xc1, listing.members[1], RemovalReport::Outcome::kRemoved);
  CHECK(out.str() ==
        "{\"member\":\"n\xef\xbf\xbd\",\"clusterID\":\"c1\",\"result\":\"not a member\"}\n"
        "{\"id\":\"b28bdc1605fb2197\",\"name\":\"n\xef\xbf\xbd\",\"clusterID\":\"c1\",\"result\":\"removed\"}\n");
}

TEST_CASE("discover -w json adds each member's etcd version and the cluster version, null where none answered") {
  auto set = MemberSet::Create({{"n1", {"http://127.0.0.1:2380"}, {"http://127.0.0.1:2379"}},
                                {"n2", {"http://127.0.0.2:2380"}, {"http://127.0.0.2:2379"}},
                                {"n3", {"http://127.0.0.3:2380"}, {"http://127.0.0.3:2379"}}},
                               "tok");
  REQUIRE(set.ok());
  std::vector<std::optional<VersionAnswer>> versions = {VersionAnswer{{3, 5, 30}, EtcdVersion{3, 4, 0}},
                                                        VersionAnswer{{3, 4, 23}, EtcdVersion{3, 4, 0}}, std::nullopt};
  auto doc = nlohmann::json::parse(FormatDiscovered(*set, OutputFormat::kJson, nullptr, &versions));
  CHECK(doc["clusterVersion"] == "3.4.0");
  CHECK(doc["members"][0]["etcdVersion"] == "3.5.30");
  CHECK(doc["members"][1]["etcdVersion"] == "3.4.23");
  CHECK(doc["members"][2]["etcdVersion"].is_null());
  // Without versions (cluster-init), the shape is as before.
  auto plain = nlohmann::json::parse(FormatDiscovered(*set, OutputFormat::kJson));
  CHECK_FALSE(plain.contains("clusterVersion"));
  CHECK_FALSE(plain["members"][0].contains("etcdVersion"));
  CHECK_FALSE(plain.contains("clusterSize"));
  // The size and where it came from, in every format.
  SizeSource size{5, "aws Auto Scaling group etcd in eu-west-1"};
  auto sized = nlohmann::json::parse(FormatDiscovered(*set, OutputFormat::kJson, &size));
  CHECK(sized["clusterSize"] == 5);
  CHECK(sized["clusterSizeFrom"] == "aws Auto Scaling group etcd in eu-west-1");
  for (auto format : {OutputFormat::kTable, OutputFormat::kSimple}) {
    CHECK(FormatDiscovered(*set, format, &size).find("cluster size 5, from aws Auto Scaling group etcd in eu-west-1\n") !=
          std::string::npos);
  }
}

}  // namespace quorate
