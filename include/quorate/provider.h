// Discovery providers answer one question: which members are expected right now. They never decide
// how to start (that is the planner's job). Each provider lives in discovery/<name>/ and registers a
// factory here by name, so adding one touches nothing else.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "quorate/clock.h"
#include "quorate/member.h"
#include "quorate/status.h"

namespace quorate {

// `provider=NAME key=value key="value with spaces"`, the go-discover convention.
struct DiscoverySpec {
  std::string provider;
  std::map<std::string, std::string> params;
  std::string text;  // as given, for messages
  // The flag a key's value was typed as, when not `--discovery key=...`: a static provider made from
  // --initial-cluster has {"members", "--initial-cluster"}, so its messages name what the user typed.
  std::map<std::string, std::string> labels;
};
Result<DiscoverySpec> ParseDiscoverySpec(std::string_view text);

class DiscoveryProvider {
 public:
  virtual ~DiscoveryProvider() = default;
  // The members the provider sees now. InvalidArgument only for the operator's own spec (exit 2);
  // whatever the remote side answered wrongly or not at all is Unavailable: retried within --timeout.
  virtual Result<std::vector<Member>> Discover() = 0;
  // The member count the provider's configuration fixes (a static list), if any.
  virtual std::optional<size_t> ImpliedSize() const { return std::nullopt; }
  // True when the last Discover() that succeeded read a whole group the platform keeps (a cloud
  // scaling group listed to its last page, pending instances included, none left out by an error or
  // a throttle): a cluster member whose peer URLs belong to none of its instances has left the group
  // for good (DESIGN §4 rule 9). False, the default, for any list that may be partial or lag behind.
  virtual bool ListsWholeGroup() const { return false; }
  // One line for logs: "dns-srv _etcd-server._tcp.example.com".
  virtual std::string Describe() const = 0;
};

// What the caller knows about the node asking. Rendezvous providers (`file`, `s3`, `etcd`) register
// `self` and seal `cluster_size` members under `token`; the others ignore it.
struct ProviderContext {
  Member self;                         // empty name: the caller has no --name
  std::string token;                   // --initial-cluster-token; empty: the provider's default
  std::optional<size_t> cluster_size;  // --cluster-size
  // The caller's --timeout as a point in time: no network call of the provider lasts past it.
  Clock::TimePoint deadline = Clock::kNever;
};

// Reads a provider's keys; every key must be read, so a misspelt one is an error, not ignored.
class ProviderParams {
 public:
  explicit ProviderParams(const DiscoverySpec& spec) : ProviderParams(spec, EmptyContext()) {}
  ProviderParams(const DiscoverySpec& spec, const ProviderContext& context) : spec_(spec), context_(context) {}
  std::optional<std::string> Take(const std::string& key);
  Result<std::string> TakeRequired(const std::string& key);
  // A whole number from lo to hi, `fallback` when not given; InvalidArgument naming the key and
  // `what` it must be ("a port").
  Result<int> TakeNumber(const std::string& key, int fallback, int lo, int hi, const char* what);
  // InvalidArgument naming the keys nobody took, and the ones that are known.
  Status CheckAllTaken(const std::vector<std::string>& known) const;
  // How the user typed `key`, for messages: "--discovery members", or the flag it came from.
  std::string Label(const std::string& key) const;
  const std::string& provider() const { return spec_.provider; }
  const ProviderContext& context() const { return context_; }

 private:
  static const ProviderContext& EmptyContext();
  const DiscoverySpec& spec_;
  const ProviderContext& context_;
  std::map<std::string, bool> taken_;
};

using ProviderFactory = std::function<Result<std::unique_ptr<DiscoveryProvider>>(ProviderParams&)>;

class ProviderRegistry {
 public:
  static ProviderRegistry& Get();
  // A duplicate name is a programming error and aborts.
  void Register(const std::string& name, ProviderFactory factory);
  // InvalidArgument for an unknown provider, listing the known ones.
  Result<std::unique_ptr<DiscoveryProvider>> Create(const DiscoverySpec& spec) const;
  Result<std::unique_ptr<DiscoveryProvider>> Create(const DiscoverySpec& spec, const ProviderContext& context) const;
  std::vector<std::string> Names() const;

 private:
  std::map<std::string, ProviderFactory> factories_;
};

// `static const RegisterProvider kRegistration("name", factory);` in the provider's source file.
struct RegisterProvider {
  RegisterProvider(const std::string& name, ProviderFactory factory) {
    ProviderRegistry::Get().Register(name, std::move(factory));
  }
};

// The client URL etcd would listen on by convention for a member known only by its peer URL:
// the same scheme and host, port 2379.
std::string DefaultClientUrl(const PeerUrl& peer);

}  // namespace quorate
