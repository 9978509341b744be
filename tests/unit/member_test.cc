#include <doctest/doctest.h>

#include "quorate/member.h"

namespace quorate {

// Expected values come from etcd 3.4.23 itself: `etcd --name infra1 --initial-cluster
// infra1=http://127.0.0.1:2380 --initial-cluster-token etcd-cluster` reports these IDs.
TEST_CASE("member and cluster IDs match etcd for a one-member cluster") {
  MemberId id = ComputeMemberId({"http://127.0.0.1:2380"}, "etcd-cluster");
  CHECK(IdToHex(id) == "b71f75320dc06a6c");
  CHECK(IdToHex(ComputeClusterId({id})) == "1c45a069f3a1d796");
}

TEST_CASE("member ID ignores peer URL order") {
  CHECK(ComputeMemberId({"http://b:2380", "http://a:2380"}, "t") ==
        ComputeMemberId({"http://a:2380", "http://b:2380"}, "t"));
  CHECK(ComputeMemberId({"http://a:2380"}, "t1") != ComputeMemberId({"http://a:2380"}, "t2"));
}

TEST_CASE("cluster ID ignores member order") {
  CHECK(ComputeClusterId({1, 2, 3}) == ComputeClusterId({3, 1, 2}));
  CHECK(ComputeClusterId({1, 2}) != ComputeClusterId({1, 2, 3}));
}

TEST_CASE("hex IDs round-trip and reject garbage") {
  CHECK(IdToHex(0x8e9e05c52164694dULL) == "8e9e05c52164694d");
  CHECK(*IdFromHex("8e9e05c52164694d") == 0x8e9e05c52164694dULL);
  CHECK(IdFromHex("").status().IsInvalidArgument());
  CHECK(IdFromHex("xyz").status().IsInvalidArgument());
  CHECK(IdFromHex("1g").status().IsInvalidArgument());
}

TEST_CASE("URLs are scheme://host:port and nothing else") {
  CHECK(ParseUrl("http://127.0.0.1:2380").ok());
  CHECK(ParseUrl("https://etcd-0.etcd.default.svc:2380").ok());
  CHECK(ParseUrl("http://[::1]:2380").ok());
  CHECK(ParseUrl("http://[::1]:2380")->host == "::1");
  for (const char* bad : {"127.0.0.1:2380", "ftp://h:1", "http://h", "http://h:0", "http://h:70000",
                          "http://h:2380/", "http://h:2380/x", "http://:2380", "http://h h:1",
                          "http://[::1:2380", "http://h:abc"}) {
    CAPTURE(bad);
    auto r = ParseUrl(bad);
    CHECK(r.status().IsInvalidArgument());
    CHECK(r.status().message().find(bad) != std::string::npos);
  }
}

TEST_CASE("initial cluster parsing") {
  auto members = ParseInitialCluster("a=http://h1:2380,b=http://h2:2380,a=http://h3:2380", "--initial-cluster");
  REQUIRE(members.ok());
  REQUIRE(members->size() == 2);
  CHECK((*members)[0].peer_urls.size() == 2);
  CHECK(ParseInitialCluster("", "x").status().IsInvalidArgument());
  CHECK(ParseInitialCluster("a", "x").status().IsInvalidArgument());
  CHECK(ParseInitialCluster("=http://h:1", "x").status().IsInvalidArgument());
  CHECK(ParseInitialCluster("a=h:1", "x").status().IsInvalidArgument());
}

TEST_CASE("member sets refuse duplicates") {
  auto dup_name = MemberSet::Create({{"a", {"http://h1:2380"}, {}}, {"a", {"http://h2:2380"}, {}}}, "t");
  CHECK(dup_name.status().IsInvalidArgument());
  auto dup_url = MemberSet::Create({{"a", {"http://h1:2380"}, {}}, {"b", {"http://h1:2380"}, {}}}, "t");
  CHECK(dup_url.status().IsInvalidArgument());
  CHECK(MemberSet::Create({}, "t").status().IsInvalidArgument());
  CHECK(MemberSet::Create({{"a", {"http://h1:2380"}, {}}}, "").status().IsInvalidArgument());
}

TEST_CASE("member sets sort by name and render --initial-cluster") {
  auto set = MemberSet::Create({{"b", {"http://h2:2380"}, {}}, {"a", {"http://h1:2380"}, {}}}, "t");
  REQUIRE(set.ok());
  CHECK(set->InitialCluster() == "a=http://h1:2380,b=http://h2:2380");
  CHECK(set->FindByName("b") != nullptr);
  CHECK(set->FindById(set->IdOf(set->members()[0]))->name == "a");
}

}  // namespace quorate
