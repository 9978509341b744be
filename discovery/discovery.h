// The discovery glue the commands share (`init`, `run`, `discover`, `cluster-init`): the provider
// the flags name, and the wait until it lists the expected number of members.
#pragma once

#include <memory>
#include <vector>

#include "quorate/clock.h"
#include "core/config.h"
#include "quorate/member.h"
#include "quorate/provider.h"
#include "quorate/status.h"

namespace quorate {

// The provider the flags name: --discovery, --initial-cluster or --discovery-srv (exactly one).
// `deadline` (real time) bounds its calls; give the one DiscoverExpected waits to, so a try cut short
// by it is known as such and the reason reported is what the provider answered before.
Result<std::unique_ptr<DiscoveryProvider>> ProviderFromConfig(const Config& config, Clock::TimePoint deadline);

// `provider` with each answer checked as a member set (unique names and peer URLs, each as etcd takes
// it): one that is not is Unavailable, a runtime answer retried within --timeout, never bad input.
// ProviderFromConfig's providers come so.
std::unique_ptr<DiscoveryProvider> CheckingAnswers(std::unique_ptr<DiscoveryProvider> provider);

// Asks the provider, paced by `backoff` (its deadline is --timeout's), until it returns the expected
// number of members. InvalidArgument at once for the operator's own bad spec (a wrong answer is
// retried); DeadlineExceeded saying what is missing; Cancelled when the stop fd became readable.
Result<std::vector<Member>> DiscoverExpected(DiscoveryProvider& provider, const Config& config, Backoff& backoff);
// The same on the real clock, without a stop fd.
Result<std::vector<Member>> DiscoverExpected(DiscoveryProvider& provider, const Config& config,
                                             Clock::TimePoint deadline);

// How often discovery and the start-up decision look again while they wait.
inline constexpr auto kDiscoveryPollInterval = std::chrono::milliseconds(250);

}  // namespace quorate
