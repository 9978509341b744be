#include "etcd/peer_probe.h"

#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "quorate/http.h"
#include "quorate/json.h"
#include "quorate/text.h"

namespace quorate {
namespace {

using nlohmann::json;

// etcd's answer is about 200 bytes a member; a cluster has at most a few dozen.
constexpr size_t kMaxMembersAnswerBytes = 1 << 20;

// etcd omits empty optional fields, and Go writes a nil list as null: both mean "absent".
const json* Optional(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

// Empty when `v` is a list of URLs as etcd writes them (copied into `out`), else what is wrong.
// Each is checked as a URL before use: these end up in etcd's --initial-cluster and in its config.
std::string UrlList(const json& v, const char* field, std::vector<std::string>* out) {
  if (!v.is_array()) return fmt::format("{} is {}, not a list of strings", field, v.type_name());
  for (const auto& u : v) {
    if (!u.is_string()) return fmt::format("{} holds {}, not a string", field, u.type_name());
    auto url = ParseUrl(u.get_ref<const std::string&>());
    if (!url.ok()) return fmt::format("{}: {}", field, url.status().message());
    out->push_back(url->text);
  }
  return {};
}

}  // namespace

Result<ClusterView> ParseMembersAnswer(const std::string& body, const std::string& cluster_id_header,
                                       const std::string& source) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(fmt::format("{} is not an etcd peer answer: {}", source, why));
  };
  if (cluster_id_header.empty()) return bad("no X-Etcd-Cluster-ID header");
  auto cid = IdFromHex(cluster_id_header);
  if (!cid.ok()) return bad(fmt::format("X-Etcd-Cluster-ID header '{}' is not a hex ID", Printable(cluster_id_header)));
  auto parsed = ParseForeignJson(body);
  if (!parsed.ok()) return bad("body is " + parsed.status().message());
  const json& doc = *parsed;
  if (!doc.is_array()) return bad(fmt::format("body is a JSON {}, not a list of members", doc.type_name()));
  ClusterView view;
  view.cluster_id = *cid;
  std::set<MemberId> seen;
  for (size_t i = 0; i < doc.size(); ++i) {
    const json& m = doc[i];
    auto bad_member = [&](const std::string& why) { return bad(fmt::format("member #{}: {}", i, why)); };
    if (!m.is_object()) return bad_member(fmt::format("is a JSON {}, not an object", m.type_name()));
    const json* id = Optional(m, "id");
    // nlohmann reads every non-negative integer as unsigned, so IDs above 2^63 arrive intact;
    // negative, fractional or quoted IDs are not etcd's.
    if (!id) return bad_member("no id");
    if (!id->is_number_unsigned()) return bad_member(fmt::format("id {} is not an unsigned integer", id->dump()));
    ClusterMember member;
    member.id = id->get<uint64_t>();
    if (!seen.insert(member.id).second) return bad_member(fmt::format("id {} appears twice", IdToHex(member.id)));
    const json* peer_urls = Optional(m, "peerURLs");
    if (!peer_urls) return bad_member("no peerURLs");
    if (auto why = UrlList(*peer_urls, "peerURLs", &member.peer_urls); !why.empty()) return bad_member(why);
    if (member.peer_urls.empty()) return bad_member("peerURLs is empty");
    if (const json* name = Optional(m, "name")) {
      if (!name->is_string()) return bad_member(fmt::format("name is {}, not a string", name->type_name()));
      member.name = name->get<std::string>();
      if (Status s = CheckMemberName(member.name, "name"); !s.ok()) return bad_member(s.message());
    }
    if (const json* client_urls = Optional(m, "clientURLs")) {
      if (auto why = UrlList(*client_urls, "clientURLs", &member.client_urls); !why.empty()) {
        return bad_member(why);
      }
    }
    if (const json* learner = Optional(m, "isLearner")) {
      if (!learner->is_boolean()) {
        return bad_member(fmt::format("isLearner is {}, not a boolean", learner->type_name()));
      }
      member.is_learner = learner->get<bool>();
    }
    view.members.push_back(std::move(member));
  }
  if (view.members.empty()) return bad("no members");
  return view;
}

namespace {

// GET `target` on an etcd peer URL: the 200 answer's response, Unavailable when nothing answers,
// InvalidArgument when something answers but not as etcd does.
Result<HttpResponse> PeerGet(const std::string& peer_url, const TlsFiles& peer_tls, const std::string& target,
                             std::chrono::milliseconds timeout, size_t max_body) {
  auto url = ParseUrl(peer_url);
  if (!url.ok()) return url.status().Prefixed("probing etcd peer");
  const std::string source = peer_url + target;
  HttpRequest request;
  request.base_url = peer_url;
  request.tls = peer_tls;
  request.target = target;
  request.timeout = timeout;
  request.max_body = max_body;
  HttpResult answer = HttpSend(request);
  switch (answer.failure) {
    case HttpFailure::kNone:
      break;
    case HttpFailure::kTlsSetUp:
      return Status::InvalidArgument(fmt::format("{}: {} (peer TLS files)", source, answer.why));
    case HttpFailure::kNoConnection:
    case HttpFailure::kNoAnswer:
      return Status::Unavailable(fmt::format("{} not answering: {}", source, answer.why));
    default:
      // Something answered, but not as etcd does (too slowly, too much, or TLS that failed once
      // connected): a caller that took it for "no etcd there" could bootstrap beside a running cluster.
      return Status::InvalidArgument(fmt::format("{} answered, but {}", source, answer.why));
  }
  if (answer.response.status != 200) {
    return Status::InvalidArgument(fmt::format("{} answered HTTP {}, not 200", source, answer.response.status));
  }
  return std::move(answer.response);
}

// GET /version is about 50 bytes.
constexpr size_t kMaxVersionAnswerBytes = 4096;

}  // namespace

Result<ClusterView> ProbeMembers(const std::string& peer_url, const TlsFiles& peer_tls,
                                 std::chrono::milliseconds timeout) {
  auto response = PeerGet(peer_url, peer_tls, "/members", timeout, kMaxMembersAnswerBytes);
  if (!response.ok()) return response.status();
  return ParseMembersAnswer(response->body, response->Header("X-Etcd-Cluster-ID"), peer_url + "/members");
}

Result<VersionAnswer> ParseVersionAnswer(const std::string& body, const std::string& source) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(fmt::format("{} is not an etcd version answer: {}", source, why));
  };
  auto parsed = ParseForeignJson(body);
  if (!parsed.ok()) return bad("body is " + parsed.status().message());
  const json& doc = *parsed;
  if (!doc.is_object()) return bad(fmt::format("body is a JSON {}, not an object", doc.type_name()));
  auto field = [&](const char* key) -> Result<std::string> {
    const json* v = Optional(doc, key);
    if (!v) return bad(fmt::format("no {}", key));
    if (!v->is_string()) return bad(fmt::format("{} is {}, not a string", key, v->type_name()));
    return v->get<std::string>();
  };
  auto server_text = field("etcdserver");
  if (!server_text.ok()) return server_text.status();
  auto cluster_text = field("etcdcluster");
  if (!cluster_text.ok()) return cluster_text.status();
  VersionAnswer answer;
  auto server = ParseEtcdVersion(*server_text, source + " etcdserver");
  if (!server.ok()) return bad(server.status().message());
  answer.server = *server;
  // Until the leader has decided the cluster version, etcd says so in words.
  if (*cluster_text != "not_decided") {
    auto cluster = ParseEtcdVersion(*cluster_text, source + " etcdcluster");
    if (!cluster.ok()) return bad(cluster.status().message());
    answer.cluster = *cluster;
  }
  return answer;
}

Result<VersionAnswer> ProbeVersion(const std::string& peer_url, const TlsFiles& peer_tls,
                                   std::chrono::milliseconds timeout) {
  auto response = PeerGet(peer_url, peer_tls, "/version", timeout, kMaxVersionAnswerBytes);
  if (!response.ok()) return response.status();
  return ParseVersionAnswer(response->body, peer_url + "/version");
}

Result<WallTime> ProbePeerCertNotAfter(const std::string& peer_url, const TlsFiles& peer_tls,
                                       std::chrono::milliseconds timeout) {
  auto cert = ReadServerCertificate(peer_url, peer_tls, timeout);
  if (!cert.ok()) return cert.status();
  return cert->not_after;
}

}  // namespace quorate
