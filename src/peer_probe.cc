#include "quorate/peer_probe.h"

#include <httplib.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace quorate {

Result<ClusterView> ParseMembersAnswer(const std::string& body, const std::string& cluster_id_header,
                                       const std::string& source) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(fmt::format("{} is not an etcd peer answer: {}", source, why));
  };
  auto cid = IdFromHex(cluster_id_header);
  if (!cid.ok()) return bad(fmt::format("X-Etcd-Cluster-ID header '{}' is not a hex ID", cluster_id_header));
  auto doc = nlohmann::json::parse(body, nullptr, false);
  if (doc.is_discarded() || !doc.is_array()) return bad("body is not a JSON list of members");
  ClusterView view;
  view.cluster_id = *cid;
  for (const auto& m : doc) {
    if (!m.is_object() || !m.contains("id") || !m["id"].is_number_unsigned()) {
      return bad("a member has no unsigned integer id");
    }
    ClusterMember member;
    member.id = m["id"].get<uint64_t>();
    if (m.contains("name")) {
      if (!m["name"].is_string()) return bad("a member name is not a string");
      member.name = m["name"].get<std::string>();
    }
    for (auto [field, target] : {std::pair{"peerURLs", &member.peer_urls}, std::pair{"clientURLs", &member.client_urls}}) {
      if (!m.contains(field)) continue;
      if (!m[field].is_array()) return bad(fmt::format("{} is not a list", field));
      for (const auto& u : m[field]) {
        if (!u.is_string()) return bad(fmt::format("{} holds a non-string", field));
        target->push_back(u.get<std::string>());
      }
    }
    if (m.contains("isLearner")) {
      if (!m["isLearner"].is_boolean()) return bad("isLearner is not a boolean");
      member.is_learner = m["isLearner"].get<bool>();
    }
    if (member.peer_urls.empty()) return bad(fmt::format("member {} has no peer URLs", IdToHex(member.id)));
    view.members.push_back(std::move(member));
  }
  if (view.members.empty()) return bad("no members");
  return view;
}

Result<ClusterView> ProbeMembers(const std::string& peer_url, const TlsFiles& peer_tls,
                                 std::chrono::milliseconds timeout) {
  httplib::Client client(peer_url);
  auto secs = std::chrono::duration_cast<std::chrono::seconds>(timeout);
  auto usecs = std::chrono::duration_cast<std::chrono::microseconds>(timeout - secs);
  client.set_connection_timeout(secs.count(), usecs.count());
  client.set_read_timeout(secs.count(), usecs.count());
  if (peer_tls.enabled()) {
    if (!peer_tls.trusted_ca_file.empty()) client.set_ca_cert_path(peer_tls.trusted_ca_file.c_str());
    client.enable_server_certificate_verification(!peer_tls.trusted_ca_file.empty());
  }
  std::string source = peer_url + "/members";
  auto res = client.Get("/members");
  if (!res) {
    return Status::Unavailable(fmt::format("{}: {}", source, httplib::to_string(res.error())));
  }
  if (res->status != 200) {
    return Status::InvalidArgument(fmt::format("{} answered HTTP {}", source, res->status));
  }
  return ParseMembersAnswer(res->body, res->get_header_value("X-Etcd-Cluster-ID"), source);
}

}  // namespace quorate
