#include "etcd/peer_probe.h"

// Debian's libcpp-httplib is compiled with OpenSSL and its pkg-config sets this macro for every
// user. Defining it here instead would only hide a header that disagrees with the library.
#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#error "https peer URLs need cpp-httplib with CPPHTTPLIB_OPENSSL_SUPPORT (use its pkg-config flags)"
#endif
#include <httplib.h>

#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "quorate/text.h"

namespace quorate {
namespace {

using nlohmann::json;

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

// httplib names its errors after its enum ("Read", "SSLServerVerification"); say what they mean.
std::string Explain(httplib::Error error, std::chrono::milliseconds timeout, bool https) {
  // A server that refuses our client certificate closes the connection once the handshake is
  // done, which the client sees as a failed write or read, depending on timing.
  const char* refused_hint = https ? "; our TLS certificate refused?" : "";
  switch (error) {
    case httplib::Error::Connection:
      return "cannot connect (refused or unreachable)";
    case httplib::Error::ConnectionTimeout:
      return fmt::format("no connection within {} ms", timeout.count());
    case httplib::Error::Read:
      return fmt::format("no answer (connection closed, or silent for {} ms{})", timeout.count(), refused_hint);
    case httplib::Error::Write:
      return fmt::format("request not sent (connection closed{})", refused_hint);
    case httplib::Error::SSLConnection:
      return "TLS handshake failed";
    case httplib::Error::SSLServerVerification:
      return "its TLS certificate is not trusted (check the peer trusted CA file)";
    default:
      return httplib::to_string(error);
  }
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
  json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return bad("body is not JSON");
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

Result<ClusterView> ProbeMembers(const std::string& peer_url, const TlsFiles& peer_tls,
                                 std::chrono::milliseconds timeout) {
  auto url = ParseUrl(peer_url);
  if (!url.ok()) return url.status().Prefixed("probing etcd peer");
  std::string source = peer_url + "/members";
  // The client certificate matters only for https; an http client ignores it.
  httplib::Client client(peer_url, peer_tls.cert_file, peer_tls.key_file);
  if (!client.is_valid()) {
    return Status::InvalidArgument(fmt::format("{}: cannot use peer TLS certificate '{}' with key '{}'", source,
                                               peer_tls.cert_file, peer_tls.key_file));
  }
  // Without a CA file the system roots verify the server: verification is never turned off.
  if (!peer_tls.trusted_ca_file.empty()) client.set_ca_cert_path(peer_tls.trusted_ca_file.c_str());
  auto secs = std::chrono::duration_cast<std::chrono::seconds>(timeout);
  auto usecs = std::chrono::duration_cast<std::chrono::microseconds>(timeout - secs);
  client.set_connection_timeout(secs.count(), usecs.count());
  client.set_read_timeout(secs.count(), usecs.count());
  client.set_write_timeout(secs.count(), usecs.count());
  auto res = client.Get("/members");
  if (res.error() == httplib::Error::SSLLoadingCerts) {
    return Status::InvalidArgument(
        fmt::format("{}: cannot load peer trusted CA file '{}'", source, peer_tls.trusted_ca_file));
  }
  if (!res) {
    std::string why = Explain(res.error(), timeout, url->scheme == "https");
    // Something accepted the connection and then failed TLS: that is not "no etcd there", and a
    // caller that took it for that could bootstrap beside a running cluster.
    if (res.error() == httplib::Error::SSLConnection || res.error() == httplib::Error::SSLServerVerification) {
      return Status::InvalidArgument(fmt::format("{} answered, but {}", source, why));
    }
    return Status::Unavailable(fmt::format("{} not answering: {}", source, why));
  }
  if (res->status != 200) {
    return Status::InvalidArgument(fmt::format("{} answered HTTP {}, not 200", source, res->status));
  }
  return ParseMembersAnswer(res->body, res->get_header_value("X-Etcd-Cluster-ID"), source);
}

}  // namespace quorate
