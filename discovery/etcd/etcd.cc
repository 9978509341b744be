// The `etcd` provider: a rendezvous in an existing etcd cluster, with the key layout of etcd 3.6's
// v3 discovery, so the discovery clusters people already run serve quorate too:
//   /_etcd/registry/<token>/_config/size       the expected member count, decimal
//   /_etcd/registry/<token>/members/<hex id>   "name=peerURL[,name=peerURL2]" of one member
// Each member claims its key in one transaction (only if never created); the members are the first
// `size` claims in creation-revision order, which every reader sees the same way.
#include <algorithm>
#include <charconv>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "quorate/tls.h"
#include "etcd/etcd_client.h"
#include "quorate/provider.h"
#include "quorate/text.h"

namespace quorate {
namespace {

constexpr size_t kMaxValueBytes = 4096;

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
    MemberId id = ComputeMemberId(self_.peer_urls, token_);
    std::vector<std::string> entries;
    for (const auto& u : self_.peer_urls) entries.push_back(self_.name + "=" + u);
    auto claimed = client_->PutIfAbsent(fmt::format("{}/members/{}", Prefix(), IdToHex(id)),
                                        fmt::format("{}", fmt::join(entries, ",")));
    if (!claimed.ok()) return claimed.status();

    auto kvs = client_->GetPrefix(Prefix() + "/members/");
    if (!kvs.ok()) return kvs.status();
    std::sort(kvs->begin(), kvs->end(),
              [](const KeyValue& a, const KeyValue& b) { return a.create_revision < b.create_revision; });
    std::vector<Member> members;
    bool self_in = false;
    for (const auto& kv : *kvs) {
      if (members.size() == *size) break;
      auto member = ParseClaim(kv);
      if (!member.ok()) return member.status();
      self_in |= member->name == self_.name;
      members.push_back(std::move(*member));
    }
    if (members.size() == *size && !self_in) {
      std::vector<std::string> names;
      for (const auto& m : members) names.push_back(m.name);
      return Status::FailedPrecondition(fmt::format(
          "extra: the first {} members registered in {} ({}) do not include {}; raise the size or remove a member",
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
    if (ec != std::errc() || end != text.data() + text.size() || n == 0 || n > 99) {
      // The registry's content is fetched at run time: whoever wrote it may still fix it.
      return Status::Unavailable(
          fmt::format("{} holds '{}', not a member count from 1 to 99", key, Printable(text, 64)));
    }
    if (size_ && *size_ != n) {
      return Status::InvalidArgument(fmt::format("--cluster-size {} contradicts {} = {}", *size_, key, n));
    }
    return n;
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
    auto members = ParseInitialCluster(kv.value, "its value");
    if (!members.ok()) return refuse("is not one member's claim: " + members.status().message());
    if (members->size() != 1) return refuse(fmt::format("names {} members, not one", members->size()));
    Member m = std::move(members->front());
    if (m.name.size() > 253 || m.name.find_first_of("/ \t\r\n") != std::string::npos) {
      return refuse("has a bad member name");
    }
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

Result<std::unique_ptr<DiscoveryProvider>> CreateEtcd(ProviderParams& params) {
  auto endpoints = params.TakeRequired("endpoints");
  if (!endpoints.ok()) return endpoints.status();
  std::string token = params.Take("token").value_or(params.context().token);
  TlsFiles tls{params.Take("cert").value_or(""), params.Take("key").value_or(""),
               params.Take("cacert").value_or(""), false};
  if (Status s = params.CheckAllTaken({"endpoints", "token", "cacert", "cert", "key"}); !s.ok()) return s;
  auto urls = ParseUrlList(*endpoints, "--discovery endpoints");
  if (!urls.ok()) return urls.status();
  if (token.empty() || token.find_first_of("/ \t\r\n") != std::string::npos) {
    return Status::InvalidArgument(fmt::format("--discovery token '{}' must be one path segment", token));
  }
  const Member& self = params.context().self;
  if (self.name.empty() || self.peer_urls.empty()) {
    return Status::InvalidArgument("--discovery provider=etcd needs --name and --initial-advertise-peer-urls to register");
  }
  // Each call gets 3 s, and none outlives the caller's --timeout.
  auto client = MakeEtcdClient({*urls, tls, std::chrono::seconds(3), params.context().deadline});
  return std::unique_ptr<DiscoveryProvider>(
      new EtcdProvider(std::move(client), *endpoints, self, token, params.context().cluster_size));
}

const RegisterProvider kRegistration("etcd", CreateEtcd);

}  // namespace
}  // namespace quorate
