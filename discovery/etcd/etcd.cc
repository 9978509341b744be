// The `etcd` provider: a rendezvous in an existing etcd cluster, with the key layout of etcd 3.6's
// v3 discovery, so the discovery clusters people already run serve quorate too:
//   /_etcd/registry/<token>/_config/size       the expected member count, decimal
//   /_etcd/registry/<token>/members/<hex id>   "name=peerURL[,name=peerURL2]" of one member
// Each member claims its key in one transaction (only if never created, and only while the registry
// has fewer than `size` claims, as etcd 3.6's checkCluster does); the members are the first `size`
// claims in creation-revision order, which every reader sees the same way. A claim's value is read
// as etcd reads it (trimmed; any member name --initial-cluster can carry), so etcd 3.6 members
// started with --discovery-endpoints and quorate nodes share one registry. user= with password_file=
// (or ETCD_DISCOVERY_PASSWORD) reaches a registry with auth enabled.
#include <algorithm>
#include <charconv>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "quorate/tls.h"
#include "etcd/etcd_client.h"
#include "quorate/env.h"
#include "quorate/fs.h"
#include "quorate/limits.h"
#include "quorate/provider.h"
#include "quorate/text.h"

namespace quorate {
namespace {

constexpr size_t kMaxValueBytes = 4096;
constexpr size_t kMaxPasswordBytes = 4096;

// Go's strings.TrimSpace on ASCII whitespace, which etcd 3.6 applies to every claim it reads.
std::string_view TrimmedSpace(std::string_view text) {
  constexpr std::string_view kSpace = " \t\r\n\v\f";
  const size_t first = text.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(kSpace) - first + 1);
}

class EtcdProvider : public DiscoveryProvider {
 public:
  EtcdProvider(std::unique_ptr<EtcdClient> client, std::string endpoints, Member self, std::string token,
               std::optional<size_t> size)
      : client_(std::move(client)),
        endpoints_(std::move(endpoints)),
        self_(std::move(self)),
        token_(std::move(token)),
        size_(size) {}

  std::string Describe() const override {
    return fmt::format("etcd registry {} at {}", Prefix(), endpoints_);
  }
  std::optional<size_t> ImpliedSize() const override { return size_; }

  Result<std::vector<Member>> Discover() override {
    auto size = RegistrySize();
    if (!size.ok()) return size.status();
    size_ = *size;
    const std::string own_key = fmt::format("{}/members/{}", Prefix(), IdToHex(ComputeMemberId(self_.peer_urls, token_)));
    auto registered = Registered();
    if (!registered.ok()) return registered.status();
    // As etcd 3.6's checkCluster: a registry whose first `size` claims are others' is full, and a
    // node that is not among them never writes its own key into it.
    if (!Holds(*registered, own_key) && registered->size() < *size) {
      std::vector<std::string> entries;
      for (const auto& u : self_.peer_urls) entries.push_back(self_.name + "=" + u);
      // etcd writes its URLsMap as sorted name=url pairs; the same bytes here.
      std::sort(entries.begin(), entries.end());
      auto claimed = client_->PutIfAbsent(own_key, fmt::format("{}", fmt::join(entries, ",")));
      if (!claimed.ok()) return claimed.status();
      registered = Registered();
      if (!registered.ok()) return registered.status();
    }
    std::vector<Member> members;
    for (const auto& [key, member] : *registered) members.push_back(member);
    if (members.size() == *size && !Holds(*registered, own_key)) {
      std::vector<std::string> names;
      for (const auto& m : members) names.push_back(Printable(m.name, 64));
      return Status::FailedPrecondition(fmt::format(
          "extra: the first {} members registered in {} ({}) do not include {}; raise the size or remove a member "
          "(this node wrote no key there)",
          *size, Prefix(), fmt::join(names, ", "), self_.name));
    }
    return members;
  }

 private:
  std::string Prefix() const { return "/_etcd/registry/" + token_; }

  // The registry's size wins over none; a --cluster-size that contradicts it is an error.
  Result<size_t> RegistrySize() {
    std::string key = Prefix() + "/_config/size";
    auto value = client_->Get(key);
    if (!value.ok()) return value.status();
    if (!*value) {
      if (!size_) {
        return Status::InvalidArgument(
            fmt::format("{} is not set and --cluster-size is not given: give one of them", key));
      }
      auto put = client_->PutIfAbsent(key, std::to_string(*size_));
      if (!put.ok()) return put.status();
      value = client_->Get(key);
      if (!value.ok()) return value.status();
    }
    size_t n = 0;
    const std::string& text = **value;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (ec != std::errc() || end != text.data() + text.size() || n == 0 || n > size_t{kMaxClusterSize}) {
      // The registry's content is fetched at run time: whoever wrote it may still fix it.
      return Status::Unavailable(
          fmt::format("{} holds '{}', not a member count from 1 to {}", key, Printable(text, 64), kMaxClusterSize));
    }
    if (size_ && *size_ != n) {
      return Status::InvalidArgument(fmt::format("--cluster-size {} contradicts {} = {}", *size_, key, n));
    }
    return n;
  }

  // The first `size_` claims in creation order (every reader sees the same), each checked, with
  // its key.
  Result<std::vector<std::pair<std::string, Member>>> Registered() {
    auto kvs = client_->GetPrefix(Prefix() + "/members/");
    if (!kvs.ok()) return kvs.status();
    std::sort(kvs->begin(), kvs->end(),
              [](const KeyValue& a, const KeyValue& b) { return a.create_revision < b.create_revision; });
    std::vector<std::pair<std::string, Member>> claims;
    for (const auto& kv : *kvs) {
      if (claims.size() == *size_) break;
      auto member = ParseClaim(kv);
      if (!member.ok()) return member.status();
      claims.emplace_back(kv.key, std::move(*member));
    }
    return claims;
  }

  static bool Holds(const std::vector<std::pair<std::string, Member>>& claims, const std::string& key) {
    return std::any_of(claims.begin(), claims.end(), [&](const auto& claim) { return claim.first == key; });
  }

  // A claim must be well formed and its key the ID its URLs give: anything else was not written by
  // a member of this cluster and is refused rather than guessed at. It was fetched, not typed: retried
  // within --timeout (whoever planted it may delete it), then a runtime failure naming the key.
  Result<Member> ParseClaim(const KeyValue& kv) const {
    std::string key = Printable(kv.key, 300);
    auto refuse = [&](const std::string& why) {
      return Status::Unavailable(fmt::format("registry key {} {}; delete it (etcdctl del) if no member of this "
                                             "cluster wrote it", key, why));
    };
    if (kv.value.size() > kMaxValueBytes) return refuse(fmt::format("is larger than {} bytes", kMaxValueBytes));
    // etcd 3.6 trims the value before reading it, and takes any member name --initial-cluster can
    // carry ("node a" too): the same here, so both read one registry alike.
    auto members = ParseInitialCluster(TrimmedSpace(kv.value), "its value");
    if (!members.ok()) return refuse("is not one member's claim: " + members.status().message());
    if (members->size() != 1) return refuse(fmt::format("names {} members, not one", members->size()));
    Member m = std::move(members->front());
    std::string id = kv.key.substr(kv.key.rfind('/') + 1);
    if (id != IdToHex(ComputeMemberId(m.peer_urls, token_))) {
      return refuse(fmt::format("does not match the ID of {} with token {}", fmt::join(m.peer_urls, ","), token_));
    }
    for (const auto& u : m.peer_urls) m.client_urls.push_back(DefaultClientUrl(*ParseUrl(u)));
    if (m.name == self_.name) m.client_urls = self_.client_urls;
    return m;
  }

  std::unique_ptr<EtcdClient> client_;
  std::string endpoints_;
  Member self_;
  std::string token_;
  std::optional<size_t> size_;
};

// The registry's password, from password_file= or else ETCD_DISCOVERY_PASSWORD (etcd 3.6's variable
// for --discovery-password), never from the spec: a --discovery value is seen in ps and in logs.
Result<std::string> TakePassword(ProviderParams& params, const std::string& user) {
  auto file = params.Take("password_file");
  if (user.empty()) {
    if (file) return Status::InvalidArgument("--discovery provider=etcd has password_file= but no user=: give both");
    return std::string();
  }
  if (!file) {
    std::string password = Env("ETCD_DISCOVERY_PASSWORD");
    if (password.empty()) {
      return Status::InvalidArgument(fmt::format(
          "--discovery provider=etcd has user={} but no password: give password_file=PATH or set "
          "ETCD_DISCOVERY_PASSWORD",
          Printable(user, 64)));
    }
    return password;
  }
  auto text = ReadFile(*file, kMaxPasswordBytes);
  if (!text.ok()) return Status::InvalidArgument(fmt::format("--discovery password_file: {}", text.status().message()));
  // A file written by `echo` ends in a newline that is no part of the password.
  std::string password = *text;
  while (!password.empty() && (password.back() == '\n' || password.back() == '\r')) password.pop_back();
  if (password.empty()) {
    return Status::InvalidArgument(fmt::format("--discovery password_file {} is empty", Printable(*file)));
  }
  return password;
}

Result<std::unique_ptr<DiscoveryProvider>> CreateEtcd(ProviderParams& params) {
  if (params.Has("password")) {
    return Status::InvalidArgument(
        "--discovery provider=etcd: password= would show the password to anyone who can read the command line or "
        "the logs; give password_file=PATH or set ETCD_DISCOVERY_PASSWORD instead");
  }
  auto endpoints = params.TakeRequired("endpoints");
  if (!endpoints.ok()) return endpoints.status();
  const std::string& cluster_token = params.context().token;
  std::string token = params.Take("token").value_or(cluster_token);
  // etcd 3.6 starts a member under its --discovery-token: the IDs of every member and of the
  // cluster hang on it. quorate starts etcd under --initial-cluster-token, so the two must agree,
  // or the registry's IDs are not the cluster's and no cluster ever forms.
  if (!cluster_token.empty() && token != cluster_token) {
    return Status::InvalidArgument(fmt::format(
        "--discovery provider=etcd has token={} but --initial-cluster-token is '{}': the member IDs hang on the token "
        "(etcd 3.6 starts its members under --discovery-token), so give --initial-cluster-token {} and drop token=",
        Printable(token, 64), Printable(cluster_token, 64), Printable(token, 64)));
  }
  TlsFiles tls{params.Take("cert").value_or(""), params.Take("key").value_or(""),
               params.Take("cacert").value_or(""), false};
  std::string user = params.Take("user").value_or("");
  auto password = TakePassword(params, user);
  if (!password.ok()) return password.status();
  if (Status s = params.CheckAllTaken(); !s.ok()) return s;
  auto urls = ParseUrlList(*endpoints, "--discovery endpoints");
  if (!urls.ok()) return urls.status();
  if (token.empty() || token.find_first_of("/ \t\r\n") != std::string::npos) {
    return Status::InvalidArgument(fmt::format("--discovery token '{}' must be one path segment", Printable(token, 64)));
  }
  const Member& self = params.context().self;
  if (self.name.empty() || self.peer_urls.empty()) {
    return Status::InvalidArgument("--discovery provider=etcd needs --name and --initial-advertise-peer-urls to register");
  }
  // Each call gets 3 s, and none outlives the caller's --timeout.
  auto client = MakeEtcdClient({*urls, tls, std::chrono::seconds(3), params.context().deadline, user, *password});
  return std::unique_ptr<DiscoveryProvider>(
      new EtcdProvider(std::move(client), *endpoints, self, token, params.context().cluster_size));
}

const RegisterProvider kRegistration(
    "etcd",
    {{.name = "endpoints", .help = "the registry's client URLs", .required = true,
      .values = "URLs, comma-separated"},
     {.name = "token", .help = "the discovery token; must equal --initial-cluster-token (its default)"},
     {.name = "cacert", .help = "the CA bundle the registry's certificate chains to", .values = "a file"},
     {.name = "cert", .help = "the client certificate to present", .values = "a file"},
     {.name = "key", .help = "its private key", .values = "a file"},
     {.name = "user", .help = "a user, for a registry with auth enabled"},
     {.name = "password_file", .help = "the user's password; else ETCD_DISCOVERY_PASSWORD (never password=)",
      .values = "a file"}},
    CreateEtcd);

}  // namespace
}  // namespace quorate
