#include "discovery/discovery.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "quorate/log.h"

namespace quorate {
namespace {

std::string NamesOf(const std::vector<Member>& members) {
  std::vector<std::string> names;
  for (const auto& m : members) names.push_back(m.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

// Every answer a provider gives, checked once as a member set etcd could start: names unique and as
// etcd takes them, URLs well formed, no peer URL claimed by two members. A static list, which the
// operator typed, was checked when its provider was made; anything else that fails here was
// fetched at run time (two instances of one name, a registry with one address twice), so it is
// Unavailable, retried within --timeout and then exit 1 (DESIGN §1), never the operator's bad input.
class CheckedAnswers : public DiscoveryProvider {
 public:
  explicit CheckedAnswers(std::unique_ptr<DiscoveryProvider> provider) : provider_(std::move(provider)) {}

  Result<std::vector<Member>> Discover() override {
    auto members = provider_->Discover();
    if (!members.ok() || members->empty()) return members;
    // The token only seeds the IDs compared for a collision, which two distinct URL sets never have.
    if (auto set = MemberSet::Create(*members, "check"); !set.ok()) {
      return Status::Unavailable(
          fmt::format("the answer is not a member set etcd could start ({}); waiting for it to change",
                      set.status().message()));
    }
    return members;
  }
  std::optional<size_t> ImpliedSize() const override { return provider_->ImpliedSize(); }
  bool ListsWholeGroup() const override { return provider_->ListsWholeGroup(); }
  std::string Describe() const override { return provider_->Describe(); }

 private:
  std::unique_ptr<DiscoveryProvider> provider_;
};

}  // namespace

std::unique_ptr<DiscoveryProvider> CheckingAnswers(std::unique_ptr<DiscoveryProvider> provider) {
  return std::make_unique<CheckedAnswers>(std::move(provider));
}

Result<std::unique_ptr<DiscoveryProvider>> ProviderFromConfig(const Config& config, Clock::TimePoint deadline) {
  int sources = !config.discovery.empty() + !config.initial_cluster.empty() + !config.discovery_srv.empty();
  if (sources == 0) {
    return Status::InvalidArgument(
        "no discovery: give --initial-cluster, --discovery-srv or --discovery 'provider=NAME ...'");
  }
  if (sources > 1) {
    return Status::InvalidArgument("give only one of --initial-cluster, --discovery-srv and --discovery");
  }
  DiscoverySpec spec;
  if (!config.discovery.empty()) {
    auto parsed = ParseDiscoverySpec(config.discovery);
    if (!parsed.ok()) return parsed.status();
    spec = std::move(*parsed);
  } else if (!config.initial_cluster.empty()) {
    spec = {"static", {{"members", config.initial_cluster}}, "--initial-cluster", {{"members", "--initial-cluster"}}};
  } else {
    spec = {"dns-srv", {{"domain", config.discovery_srv}}, "--discovery-srv", {}};
    if (!config.discovery_srv_name.empty()) spec.params["name"] = config.discovery_srv_name;
  }
  ProviderContext context{{config.name, config.initial_advertise_peer_urls, config.advertise_client_urls},
                          config.initial_cluster_token,
                          config.cluster_size,
                          deadline};
  if (context.self.client_urls.empty() && !context.self.peer_urls.empty()) {
    context.self.client_urls.push_back(DefaultClientUrl(*ParseUrl(context.self.peer_urls.front())));
  }
  auto provider = ProviderRegistry::Get().Create(spec, context);
  if (!provider.ok()) return provider.status();
  return CheckingAnswers(std::move(*provider));
}

Result<std::vector<Member>> DiscoverExpected(DiscoveryProvider& provider, const Config& config, Backoff& backoff) {
  std::string last;
  while (true) {
    auto members = provider.Discover();
    std::string progress;
    if (members.ok()) {
      size_t want = config.cluster_size.value_or(provider.ImpliedSize().value_or(members->size()));
      if (members->size() == want && want > 0) return members;
      progress = members->size() < want
                     ? fmt::format("{}/{} discovered: {}; waiting for {} more", members->size(), want,
                                   NamesOf(*members), want - members->size())
                     : fmt::format("{} discovered ({}) but --cluster-size is {}; waiting for the extra ones to go",
                                   members->size(), NamesOf(*members), want);
    } else if (members.status().IsInvalidArgument()) {
      return members.status().Prefixed(provider.Describe());
    } else if (backoff.clock().Now() >= backoff.deadline() && !last.empty()) {
      // The try due at the deadline had no time left for its calls: the reason worth reporting is
      // what the provider answered before, not that the last call was cut short.
      progress = last;
    } else {
      progress = fmt::format("{}: {}", provider.Describe(), members.status().message());
    }
    if (progress != last) {
      spdlog::info("{}", progress);
      last = progress;
    }
    switch (backoff.Wait()) {
      case Backoff::kRetry:
        break;
      case Backoff::kDeadline:
        return Status::DeadlineExceeded(fmt::format(
            "timed out after --timeout {}s: {}",
            std::chrono::duration_cast<std::chrono::seconds>(config.timeout).count(), progress));
      case Backoff::kStopped:
        return Status::Cancelled(fmt::format("stopped while discovering the members: {}", progress));
    }
  }
}

Result<std::vector<Member>> DiscoverExpected(DiscoveryProvider& provider, const Config& config,
                                             Clock::TimePoint deadline) {
  Backoff backoff(RealClock(), kDiscoveryPollInterval, kDiscoveryPollInterval, deadline);
  return DiscoverExpected(provider, config, backoff);
}

}  // namespace quorate
