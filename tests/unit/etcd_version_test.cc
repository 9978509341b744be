#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <vector>

#include "core/etcd_version.h"
#include "etcd/etcd_version.h"
#include "etcd/peer_probe.h"
#include "node/etcd_binary.h"

namespace quorate {
namespace {

EtcdVersion V(int major, int minor, int patch) { return {major, minor, patch}; }

VersionFacts Facts(EtcdVersion binary, std::vector<PeerVersion> peers = {}) {
  return VersionFacts{binary, std::nullopt, std::move(peers)};
}

TEST_CASE("etcd versions parse as etcd prints them, and nothing else") {
  CHECK(*ParseEtcdVersion("3.5.30", "x") == V(3, 5, 30));
  CHECK(*ParseEtcdVersion("v3.4.23", "x") == V(3, 4, 23));
  CHECK(*ParseEtcdVersion("3.6.0-rc.1", "x") == V(3, 6, 0));
  for (const char* bad : {"", "3", "3.5", "3.5.", "3.5.x", "3.5.30 ", "3..1", "33333.1.1", "-3.5.1", "3.5.1x"}) {
    CAPTURE(bad);
    CHECK(ParseEtcdVersion(bad, "peer").status().IsInvalidArgument());
  }
  CHECK(V(3, 4, 23) < V(3, 5, 0));
  CHECK(V(3, 5, 30).ToString() == "3.5.30");
  CHECK(V(3, 5, 30).Minor() == "3.5");
}

TEST_CASE("etcd --version's output gives the binary's version") {
  CHECK(*ParseEtcdVersionOutput("etcd Version: 3.4.23\nGit SHA: Not provided\nGo Version: go1.19.8\n", "etcd") ==
        V(3, 4, 23));
  CHECK(*ParseEtcdVersionOutput("etcd Version: 3.5.30\r\n", "etcd") == V(3, 5, 30));
  auto none = ParseEtcdVersionOutput("Usage: etcd [flags]\n", "/bin/true");
  CHECK(none.status().message().find("/bin/true --version printed no") != std::string::npos);
  CHECK(!ParseEtcdVersionOutput("etcd Version: lots\n", "etcd").ok());
}

TEST_CASE("etcd --version is run once per binary file: the same file again is not run, a replaced one is") {
  char tmpl[] = "/tmp/quorate-etcd-version-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  const std::string etcd = dir + "/etcd";
  const std::string runs = dir + "/runs";
  auto install = [&](const std::string& version) {
    std::filesystem::remove(etcd);  // a new file, as a package upgrade puts it there
    std::ofstream(etcd) << "#!/bin/sh\necho run >> " << runs << "\necho 'etcd Version: " << version << "'\n";
    std::filesystem::permissions(etcd, std::filesystem::perms::owner_all);
  };
  auto runs_so_far = [&] {
    std::ifstream in(runs);
    return static_cast<int>(std::count(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>(), '\n'));
  };
  install("3.4.23");
  CHECK(*EtcdBinaryVersion(etcd) == V(3, 4, 23));
  CHECK(*EtcdBinaryVersion(etcd) == V(3, 4, 23));
  CHECK(runs_so_far() == 1);
  install("3.5.30");
  CHECK(*EtcdBinaryVersion(etcd) == V(3, 5, 30));
  CHECK(runs_so_far() == 2);
  std::filesystem::remove_all(dir);
}

TEST_CASE("asks of one binary at once run it once: quorate run's ask ahead and init's join") {
  char tmpl[] = "/tmp/quorate-etcd-version-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  const std::string etcd = dir + "/etcd";
  const std::string runs = dir + "/runs";
  // Slow to answer, as a Go binary on a loaded machine: the other asks come while it runs.
  std::ofstream(etcd) << "#!/bin/sh\necho run >> " << runs << "\nsleep 0.3\necho 'etcd Version: 3.5.30'\n";
  std::filesystem::permissions(etcd, std::filesystem::perms::owner_all);
  std::vector<std::future<Result<EtcdVersion>>> asks;
  for (int i = 0; i < 4; ++i) asks.push_back(std::async(std::launch::async, EtcdBinaryVersion, etcd));
  for (auto& ask : asks) {
    auto version = ask.get();
    REQUIRE(version.ok());
    CHECK(*version == V(3, 5, 30));
  }
  std::ifstream in(runs);
  CHECK(std::count(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>(), '\n') == 1);
  std::filesystem::remove_all(dir);
}

TEST_CASE("GET /version answers are read as etcd 3.4 to 3.7 write them, and checked") {
  auto v34 = ParseVersionAnswer(R"({"etcdserver":"3.4.23","etcdcluster":"3.4.0"})", "p");
  REQUIRE(v34.ok());
  CHECK(v34->server == V(3, 4, 23));
  CHECK(*v34->cluster == V(3, 4, 0));
  auto undecided = ParseVersionAnswer(R"({"etcdserver":"3.5.30","etcdcluster":"not_decided"})", "p");
  REQUIRE(undecided.ok());
  CHECK(!undecided->cluster);
  auto v36 = ParseVersionAnswer(R"({"etcdserver":"3.6.5","etcdcluster":"3.6.0","storage":"3.6.0"})", "p");
  REQUIRE(v36.ok());
  CHECK(v36->server == V(3, 6, 5));
  for (const char* bad : {"", "[]", "{}", R"({"etcdserver":"3.5.30"})", R"({"etcdserver":3,"etcdcluster":"3.5.0"})",
                          R"({"etcdserver":"abc","etcdcluster":"3.5.0"})", R"({"etcdserver":"3.5.1","etcdcluster":"x"})",
                          "<html>"}) {
    CAPTURE(bad);
    auto answer = ParseVersionAnswer(bad, "http://h:2380/version");
    REQUIRE(!answer.ok());
    CHECK(answer.status().message().find("http://h:2380/version is not an etcd version answer") == 0);
  }
}

TEST_CASE("each version's MemberAdd check: every voter connected until 3.5.30 and 3.6.11, quorum after") {
  CHECK(FeaturesOf(V(3, 4, 45)).member_add_needs_every_voter);
  CHECK(FeaturesOf(V(3, 5, 16)).member_add_needs_every_voter);
  CHECK(!FeaturesOf(V(3, 5, 30)).member_add_needs_every_voter);
  CHECK(FeaturesOf(V(3, 6, 10)).member_add_needs_every_voter);
  CHECK(!FeaturesOf(V(3, 6, 11)).member_add_needs_every_voter);
  CHECK(!FeaturesOf(V(3, 7, 0)).member_add_needs_every_voter);
}

TEST_CASE("etcd flags are spelt as each version from 3.4 to 3.7 accepts them") {
  const std::vector<std::string> old_spelling = {"--experimental-compaction-batch-limit=100",
                                                 "--experimental-initial-corrupt-check",
                                                 "--experimental-compact-hash-check-enabled=false",
                                                 "--snapshot-count=10000",
                                                 "--log-level",
                                                 "debug"};
  const std::vector<std::string> new_spelling = {"--compaction-batch-limit=100", "--snapshot-count=10000",
                                                 "--log-level", "debug",
                                                 "--feature-gates=InitialCorruptCheck=true,CompactHashCheck=false"};
  const std::vector<std::string> as_35 = {"--experimental-compaction-batch-limit=100",
                                          "--snapshot-count=10000",
                                          "--log-level",
                                          "debug",
                                          "--experimental-initial-corrupt-check=true",
                                          "--experimental-compact-hash-check-enabled=false"};
  for (auto version : {V(3, 4, 23), V(3, 5, 30)}) {
    CAPTURE(version.ToString());
    CHECK(SpellEtcdArgs(old_spelling, version) == old_spelling);
    CHECK(SpellEtcdArgs(new_spelling, version) == as_35);
  }
  for (auto version : {V(3, 6, 0), V(3, 7, 1)}) {
    CAPTURE(version.ToString());
    CHECK(SpellEtcdArgs(old_spelling, version) == new_spelling);
    CHECK(SpellEtcdArgs(new_spelling, version) == new_spelling);
  }
  // The operator's own gates join the translated ones in one flag, which etcd reads once.
  CHECK(SpellEtcdArgs({"--feature-gates=StopGRPCServiceOnDefrag=true", "--experimental-memory-mlock"}, V(3, 7, 1)) ==
        std::vector<std::string>{"--memory-mlock", "--feature-gates=StopGRPCServiceOnDefrag=true"});
  // A gate 3.5 has no flag for stays a gate, for etcd to refuse with its own words.
  CHECK(SpellEtcdArgs({"--feature-gates=SetMemberLocalAddr=true"}, V(3, 5, 30)) ==
        std::vector<std::string>{"--feature-gates=SetMemberLocalAddr=true"});
}

TEST_CASE("the cluster version is the highest a peer reports or the bucket recorded") {
  VersionFacts facts{V(3, 5, 30), V(3, 4, 0), {}};
  CHECK(*ClusterVersion(facts) == V(3, 4, 0));
  facts.peers = {{"n2", V(3, 5, 30), V(3, 5, 0)}, {"n3", V(3, 5, 30), std::nullopt}};
  CHECK(*ClusterVersion(facts) == V(3, 5, 0));
  facts.recorded_cluster = V(3, 6, 0);
  CHECK(*ClusterVersion(facts) == V(3, 6, 0));
  CHECK(!ClusterVersion(VersionFacts{}).has_value());
}

TEST_CASE("a cluster version of 3.0 is etcd's placeholder while it bootstraps, never a bound") {
  // Seen in CI: the first member of a new 3.4 cluster answered GET /version with etcdcluster 3.0.0,
  // and the others refused to start as "more than one minor version ahead".
  VersionFacts facts{V(3, 4, 23), V(3, 0, 0), {{"n2", V(3, 4, 23), V(3, 0, 0)}}};
  CHECK(!ClusterVersion(facts).has_value());
  CHECK(VersionRefusal(facts).empty());
  facts.peers.push_back({"n3", V(3, 4, 23), V(3, 4, 0)});
  CHECK(*ClusterVersion(facts) == V(3, 4, 0));
}

TEST_CASE("rule 6: a start etcd would refuse, or one that breaks the upgrade rules, is refused in one line") {
  // Allowed: the same version; a rolling upgrade one minor ahead; a mixed cluster mid-upgrade.
  CHECK(VersionRefusal(Facts(V(3, 4, 23), {{"n2", V(3, 4, 23), V(3, 4, 0)}})).empty());
  CHECK(VersionRefusal(Facts(V(3, 5, 30), {{"n2", V(3, 4, 23), V(3, 4, 0)}})).empty());
  CHECK(VersionRefusal(Facts(V(3, 4, 23), {{"n2", V(3, 5, 30), V(3, 4, 0)}})).empty());
  CHECK(VersionRefusal(Facts(V(3, 6, 5), {{"n2", V(3, 5, 32), V(3, 5, 0)}})).empty());
  // Nothing is known of the binary (init without etcd beside it): nothing to refuse.
  CHECK(VersionRefusal(VersionFacts{std::nullopt, V(3, 5, 0), {{"n2", V(3, 7, 1), V(3, 7, 0)}}}).empty());

  SUBCASE("a binary older than the cluster version, from a peer or from the bucket") {
    std::string line = VersionRefusal(Facts(V(3, 4, 23), {{"n2", V(3, 5, 30), V(3, 5, 0)}}));
    CHECK(line ==
          "etcd 3.4.23 (--etcd) is older than the cluster version 3.5, which etcd never goes back from: run etcd 3.5 "
          "or later here");
    CHECK(VersionRefusal(VersionFacts{V(3, 4, 23), V(3, 5, 0), {}}) == line);
  }
  SUBCASE("skipping a minor version") {
    CHECK(VersionRefusal(Facts(V(3, 6, 5), {{"n2", V(3, 4, 23), V(3, 4, 0)}})) ==
          "etcd 3.6.5 (--etcd) is more than one minor version ahead of the cluster version 3.4: etcd upgrades one "
          "minor version at a time, so upgrade every member to etcd 3.5 first");
    CHECK(VersionRefusal(Facts(V(3, 6, 5), {{"n2", V(3, 4, 23), std::nullopt}})) ==
          "etcd 3.6.5 (--etcd) is more than one minor version ahead of n2, which runs etcd 3.4.23: etcd upgrades one "
          "minor version at a time, so upgrade n2 to etcd 3.5 first");
    CHECK(!VersionRefusal(Facts(V(4, 0, 0), {{"n2", V(3, 7, 1), V(3, 7, 0)}})).empty());
  }
  SUBCASE("3.6 beside a 3.5 older than 3.5.32") {
    CHECK(VersionRefusal(Facts(V(3, 6, 5), {{"n2", V(3, 6, 5), V(3, 5, 0)}, {"n3", V(3, 5, 30), V(3, 5, 0)}})) ==
          "etcd 3.6.5 (--etcd) cannot join n3, which runs etcd 3.5.30: etcd 3.6 needs every 3.5 member at 3.5.32 or "
          "later first, so upgrade n3 to etcd 3.5.32 before moving any member to 3.6");
  }
}

}  // namespace
}  // namespace quorate
