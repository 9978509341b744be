#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <filesystem>

#include "core/bucket.h"
#include "quorate/fs.h"

namespace quorate {
namespace {

Bucket ThreeMembers() {
  auto set = MemberSet::Create({{"n1", {"http://127.0.0.1:2380"}, {"http://127.0.0.1:2379"}},
                                {"n2", {"http://127.0.0.2:2380"}, {"http://127.0.0.2:2379"}},
                                {"n3", {"http://127.0.0.3:2380"}, {"http://127.0.0.3:2379"}}},
                               "tok");
  REQUIRE(set.ok());
  return Bucket{*set, {"new", "2026-11-22T09:00:00Z"}};
}

}  // namespace

TEST_CASE("a bucket round-trips") {
  Bucket b = ThreeMembers();
  std::string text = EncodeBucket(b);
  auto back = DecodeBucket(text, "test");
  REQUIRE(back.ok());
  CHECK(back->members.members() == b.members.members());
  CHECK(back->members.cluster_id() == b.members.cluster_id());
  CHECK(back->cluster.state == "new");
  // etcd's own members-bucket shape: numeric id keyed by hex.
  std::string id = IdToHex(b.members.IdOf(b.members.members()[0]));
  CHECK(text.find("\"" + id + "\"") != std::string::npos);
  CHECK(text.find("\"peerURLs\"") != std::string::npos);
}

TEST_CASE("every truncation of a bucket is detected") {
  std::string text = EncodeBucket(ThreeMembers());
  for (size_t n = 0; n < text.size() - 2; n += 7) {
    CAPTURE(n);
    CHECK(DecodeBucket(text.substr(0, n), "t").status().code() == Status::Code::kDataLoss);
  }
}

TEST_CASE("tampered and foreign buckets are detected") {
  std::string text = EncodeBucket(ThreeMembers());
  auto tamper = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    auto pos = t.find(from);
    REQUIRE(pos != std::string::npos);
    t.replace(pos, from.size(), to);
    return DecodeBucket(t, "t").status();
  };
  CHECK(tamper("127.0.0.2:2380", "127.0.0.9:2380").code() == Status::Code::kDataLoss);  // ID no longer matches
  CHECK(tamper("\"tok\"", "\"other\"").code() == Status::Code::kDataLoss);
  CHECK(tamper("\"size\": 3", "\"size\": 4").code() == Status::Code::kDataLoss);
  CHECK(tamper("quorate.bucket/v1", "something/v9").code() == Status::Code::kDataLoss);
  CHECK(DecodeBucket("[]", "t").status().code() == Status::Code::kDataLoss);
  CHECK(DecodeBucket("{\"members\":{}}", "t").status().code() == Status::Code::kDataLoss);
  auto message = tamper("\"tok\"", "\"other\"").message();
  CHECK(message.find("corrupt") != std::string::npos);
  // Found by fuzzing: a field of the wrong type threw out of DecodeBucket instead of being corrupt.
  CHECK(tamper("\"quorate.bucket/v1\"", "1").code() == Status::Code::kDataLoss);
  nlohmann::json doc = nlohmann::json::parse(text);
  doc["cluster"]["state"] = nlohmann::json::array({1});
  auto odd_state = DecodeBucket(doc.dump(), "t");
  REQUIRE_MESSAGE(odd_state.ok(), odd_state.status().message());  // state and createdAt are only informative
  CHECK(odd_state->cluster.state.empty());
}

TEST_CASE("buckets are saved atomically and loaded back") {
  std::string dir = std::filesystem::temp_directory_path() / ("quorate-bucket-" + std::to_string(getpid()));
  CHECK(LoadBucket(dir).status().IsNotFound());
  REQUIRE(SaveBucket(dir, ThreeMembers()).ok());
  auto back = LoadBucket(dir);
  REQUIRE(back.ok());
  CHECK(back->members.size() == 3);
  // no temp files left behind
  size_t files = 0;
  for ([[maybe_unused]] auto& e : std::filesystem::directory_iterator(dir)) ++files;
  CHECK(files == 1);
  auto moved = MoveAside(dir + "/bucket.json", "corrupt");
  REQUIRE(moved.ok());
  CHECK(PathExists(*moved));
  CHECK_FALSE(PathExists(dir + "/bucket.json"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("a bucket records the etcd versions rule 6 remembers, and refuses ones etcd never prints") {
  Bucket b = ThreeMembers();
  CHECK(EncodeBucket(b).find("Version") == std::string::npos);  // none known, none written
  b.cluster.etcd_version = EtcdVersion{3, 5, 30};
  b.cluster.cluster_version = EtcdVersion{3, 4, 0};
  std::string text = EncodeBucket(b);
  auto back = DecodeBucket(text, "t");
  REQUIRE(back.ok());
  CHECK(*back->cluster.etcd_version == EtcdVersion{3, 5, 30});
  CHECK(*back->cluster.cluster_version == EtcdVersion{3, 4, 0});
  nlohmann::json doc = nlohmann::json::parse(text);
  for (auto bad : {nlohmann::json("3.5"), nlohmann::json(35), nlohmann::json("3.5.0\n\"x")}) {
    CAPTURE(bad.dump());
    doc["cluster"]["clusterVersion"] = bad;
    CHECK(DecodeBucket(doc.dump(), "t").status().code() == Status::Code::kDataLoss);
  }
}

}  // namespace quorate
