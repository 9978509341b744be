#include "core/bucket.h"

#include <ctime>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/json.h"
#include "quorate/fs.h"

namespace quorate {
namespace {

constexpr const char* kFormat = "quorate.bucket/v1";

using nlohmann::json;

Result<std::vector<std::string>> StringArray(const json& j, const char* field, const std::string& where) {
  if (!j.contains(field)) return std::vector<std::string>{};
  const json& a = j.at(field);
  if (!a.is_array()) return Status::DataLoss(fmt::format("{}: {} is not a list", where, field));
  std::vector<std::string> out;
  for (const auto& s : a) {
    if (!s.is_string()) return Status::DataLoss(fmt::format("{}: {} holds a non-string", where, field));
    out.push_back(s.get<std::string>());
  }
  return out;
}

// The string at `key`, or "" when it is absent or not a string: json::value would throw on another
// type, and a bucket read back from disk may hold anything.
std::string StringOr(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

std::string NowRfc3339() {
  std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return buf;
}

std::string EncodeBucket(const Bucket& bucket) {
  const MemberSet& set = bucket.members;
  json members = json::object();
  for (const auto& m : set.members()) {
    MemberId id = set.IdOf(m);
    // The shape of etcd's own members bucket records.
    members[IdToHex(id)] = {{"id", id}, {"peerURLs", m.peer_urls}, {"name", m.name}, {"clientURLs", m.client_urls}};
  }
  json doc = {{"format", kFormat},
              {"cluster",
               {{"token", set.token()},
                {"clusterID", IdToHex(set.cluster_id())},
                {"size", set.size()},
                {"state", bucket.cluster.state},
                {"createdAt", bucket.cluster.created_at}}},
              {"members", members}};
  if (bucket.cluster.etcd_version) doc["cluster"]["etcdVersion"] = bucket.cluster.etcd_version->ToString();
  if (bucket.cluster.cluster_version) doc["cluster"]["clusterVersion"] = bucket.cluster.cluster_version->ToString();
  return JsonText(doc, 2) + "\n";
}

Result<Bucket> DecodeBucket(std::string_view text, std::string_view source) {
  std::string where(source);
  auto corrupt = [&](const std::string& why) {
    return Status::DataLoss(fmt::format("member bucket {} is corrupt: {}", where, why));
  };
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return corrupt("not valid JSON (truncated or overwritten?)");
  if (!doc.is_object() || StringOr(doc, "format") != kFormat) {
    return corrupt(fmt::format("not a quorate bucket (no \"format\": \"{}\")", kFormat));
  }
  if (!doc.contains("cluster") || !doc["cluster"].is_object() || !doc.contains("members") ||
      !doc["members"].is_object()) {
    return corrupt("missing cluster or members");
  }
  const json& cluster = doc["cluster"];
  if (!cluster.contains("token") || !cluster["token"].is_string() || !cluster.contains("clusterID") ||
      !cluster["clusterID"].is_string() || !cluster.contains("size") || !cluster["size"].is_number_unsigned()) {
    return corrupt("cluster record lacks token, clusterID or size");
  }
  std::vector<Member> members;
  for (const auto& [key, record] : doc["members"].items()) {
    std::string at = fmt::format("member {}", key);
    if (!record.is_object() || !record.contains("id") || !record["id"].is_number_unsigned() ||
        !record.contains("name") || !record["name"].is_string()) {
      return corrupt(at + " lacks id or name");
    }
    auto peers = StringArray(record, "peerURLs", at);
    if (!peers.ok()) return corrupt(peers.status().message());
    auto clients = StringArray(record, "clientURLs", at);
    if (!clients.ok()) return corrupt(clients.status().message());
    Member m{record["name"].get<std::string>(), *peers, *clients};
    MemberId id = record["id"].get<uint64_t>();
    if (IdToHex(id) != key || ComputeMemberId(m.peer_urls, cluster["token"].get<std::string>()) != id) {
      return corrupt(at + ": ID does not match its peer URLs and the token");
    }
    members.push_back(std::move(m));
  }
  auto set = MemberSet::Create(std::move(members), cluster["token"].get<std::string>());
  if (!set.ok()) return corrupt(set.status().message());
  if (set->size() != cluster["size"].get<size_t>()) return corrupt("size does not match the member count");
  if (IdToHex(set->cluster_id()) != cluster["clusterID"].get<std::string>()) {
    return corrupt("clusterID does not match the members");
  }
  Bucket bucket{std::move(*set), {StringOr(cluster, "state"), StringOr(cluster, "createdAt")}};
  for (auto [key, out] : {std::pair{"etcdVersion", &bucket.cluster.etcd_version},
                          std::pair{"clusterVersion", &bucket.cluster.cluster_version}}) {
    if (!cluster.contains(key)) continue;
    if (!cluster[key].is_string()) return corrupt(fmt::format("{} is not a string", key));
    auto version = ParseEtcdVersion(cluster[key].get<std::string>(), key);
    if (!version.ok()) return corrupt(version.status().message());
    *out = *version;
  }
  return bucket;
}

Result<Bucket> LoadBucket(const std::string& dir) {
  std::string path = dir + "/" + kBucketFile;
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  return DecodeBucket(*text, path);
}

Status SaveBucket(const std::string& dir, const Bucket& bucket) {
  if (Status s = MakeDirs(dir); !s.ok()) return s;
  return WriteFileAtomic(dir + "/" + kBucketFile, EncodeBucket(bucket));
}

}  // namespace quorate
