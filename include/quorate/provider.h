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
  // What a provider waits on (a throttle's pause): null, RealClock(); a test's FakeClock.
  Clock* clock = nullptr;
};

// One key of a provider's spec, declared once in the provider's table. ProviderParams reads the key
// by it (its default, whether it is required, its range or choices), CheckAllTaken refuses a key no
// row names, `quorate discover --help-provider NAME` prints the rows, and a unit test holds DESIGN §2
// and the README to them.
struct ProviderKey {
  std::string name{};
  std::string help{};      // what it means, one line
  std::string fallback{};  // the default as the help shows it; "" for none (or one the code derives)
  bool required = false;
  // What it takes. hi > 0: a whole number from lo to hi (`values` names it: "a port"); else
  // `choices` when not empty; else any text, `values` saying what is checked ("a base URL").
  int lo = 0, hi = 0;
  std::vector<std::string> choices{};
  std::string values{};
};
using ProviderKeys = std::vector<ProviderKey>;
// `values` as the help shows it: "1-65535", "http|https", or the row's own words.
std::string DescribeValues(const ProviderKey& key);

// Reads a provider's keys by its table (the registry's, by the spec's provider name); every key
// given must be read, so a misspelt one is an error, not ignored.
class ProviderParams {
 public:
  explicit ProviderParams(const DiscoverySpec& spec) : ProviderParams(spec, EmptyContext()) {}
  ProviderParams(const DiscoverySpec& spec, const ProviderContext& context);
  // The value given, or nullopt.
  std::optional<std::string> Take(const std::string& key);
  // Whether the spec gives `key`, without reading it: for a key refused with a hint.
  bool Has(const std::string& key) const { return spec_.params.count(key) > 0; }
  // The value given, else the row's default; InvalidArgument when a required key is missing or
  // empty, or the value is not one of the row's choices.
  Result<std::string> TakeValue(const std::string& key);
  // TakeValue of a required key (the message names it as missing).
  Result<std::string> TakeRequired(const std::string& key);
  // The row's whole number: its default when not given, InvalidArgument naming the key and range.
  Result<int> TakeNumber(const std::string& key);
  // A whole number from lo to hi, `fallback` when not given; InvalidArgument naming the key and
  // `what` it must be ("a port").
  Result<int> TakeNumber(const std::string& key, int fallback, int lo, int hi, const char* what);
  // InvalidArgument naming a key given that nobody took, with the keys of the table; Internal for a
  // key the provider read that its table does not declare (a table out of step with its code).
  Status CheckAllTaken() const;
  // The same for a provider registered without a table (a test's own): `known` names its keys.
  Status CheckAllTaken(const std::vector<std::string>& known) const;
  // How the user typed `key`, for messages: "--discovery members", or the flag it came from.
  std::string Label(const std::string& key) const;
  const std::string& provider() const { return spec_.provider; }
  const ProviderContext& context() const { return context_; }

 private:
  static const ProviderContext& EmptyContext();
  const ProviderKey* Row(const std::string& key);
  const DiscoverySpec& spec_;
  const ProviderContext& context_;
  const ProviderKeys* keys_ = nullptr;  // the provider's table; null when registered without one
  std::map<std::string, bool> taken_;
  std::vector<std::string> undeclared_;  // keys read that the table does not name
};

using ProviderFactory = std::function<Result<std::unique_ptr<DiscoveryProvider>>(ProviderParams&)>;

class ProviderRegistry {
 public:
  static ProviderRegistry& Get();
  // A duplicate name is a programming error and aborts.
  // `keys` nullopt: a provider without a table (a test's own).
  void Register(const std::string& name, std::optional<ProviderKeys> keys, ProviderFactory factory);
  // InvalidArgument for an unknown provider, listing the known ones.
  Result<std::unique_ptr<DiscoveryProvider>> Create(const DiscoverySpec& spec) const;
  Result<std::unique_ptr<DiscoveryProvider>> Create(const DiscoverySpec& spec, const ProviderContext& context) const;
  std::vector<std::string> Names() const;
  // The provider's table; nullptr for an unknown provider or one registered without a table.
  const ProviderKeys* Keys(const std::string& name) const;
  // `quorate discover --help-provider NAME`: the provider's keys as a table, one row a key.
  // InvalidArgument for an unknown provider, listing the known ones.
  Result<std::string> Help(const std::string& name) const;

 private:
  struct Entry {
    std::optional<ProviderKeys> keys;
    ProviderFactory factory;
  };
  Status Unknown(const std::string& name) const;
  std::map<std::string, Entry> entries_;
};

// `static const RegisterProvider kRegistration("name", Keys(), factory);` in the provider's source
// file, its table beside it. Without a table (a test's own provider), CheckAllTaken takes the list.
struct RegisterProvider {
  RegisterProvider(const std::string& name, ProviderKeys keys, ProviderFactory factory) {
    ProviderRegistry::Get().Register(name, std::move(keys), std::move(factory));
  }
  RegisterProvider(const std::string& name, ProviderFactory factory) {
    ProviderRegistry::Get().Register(name, std::nullopt, std::move(factory));
  }
};

// The client URL etcd would listen on by convention for a member known only by its peer URL:
// the same scheme and host, port 2379.
std::string DefaultClientUrl(const PeerUrl& peer);

}  // namespace quorate
