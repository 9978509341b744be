#include "discovery/discovery.h"

#include <doctest/doctest.h>

#include <tuple>

#include "testing/fake_clock.h"

namespace quorate {
namespace {

using std::chrono::seconds;

// Answers Unavailable with `reason` while there is time, and "cut short" once the clock reaches the
// deadline, as a network provider whose calls are bounded by --timeout does on its last try.
class DeadlineBoundProvider : public DiscoveryProvider {
 public:
  DeadlineBoundProvider(Clock& clock, Clock::TimePoint deadline, std::string reason)
      : clock_(clock), deadline_(deadline), reason_(std::move(reason)) {}
  Result<std::vector<Member>> Discover() override {
    ++calls;
    if (clock_.Now() >= deadline_) return Status::Unavailable("Range: Deadline Exceeded");
    return Status::Unavailable(reason_);
  }
  std::string Describe() const override { return "test registry"; }
  int calls = 0;

 private:
  Clock& clock_;
  Clock::TimePoint deadline_;
  std::string reason_;
};

TEST_CASE("DiscoverExpected retries a runtime failure until --timeout, then reports the last real reason") {
  FakeClock clock;
  Config config;
  config.cluster_size = 3;
  config.timeout = seconds(3);
  const auto deadline = clock.Now() + config.timeout;
  DeadlineBoundProvider provider(clock, deadline, "registry key /k holds a bad claim");
  Backoff backoff(clock, kDiscoveryPollInterval, kDiscoveryPollInterval, deadline);

  auto members = DiscoverExpected(provider, config, backoff);

  REQUIRE_FALSE(members.ok());
  CHECK(members.status().code() == Status::Code::kDeadlineExceeded);
  CHECK(provider.calls > 2);
  CHECK(clock.Now() >= deadline);
  // The try at the deadline had no time for its calls: its "Deadline Exceeded" is not the reason.
  CHECK(members.status().message().find("registry key /k holds a bad claim") != std::string::npos);
  CHECK(members.status().message().find("Deadline Exceeded") == std::string::npos);
}

TEST_CASE("DiscoverExpected returns the operator's own bad input at once") {
  FakeClock clock;
  Config config;
  config.cluster_size = 3;
  struct BadSpec : DiscoveryProvider {
    Result<std::vector<Member>> Discover() override { return Status::InvalidArgument("--discovery: bad key"); }
    std::string Describe() const override { return "test"; }
  } provider;
  Backoff backoff(clock, kDiscoveryPollInterval, kDiscoveryPollInterval, clock.Now() + seconds(3));
  const auto started = clock.Now();

  auto members = DiscoverExpected(provider, config, backoff);

  REQUIRE_FALSE(members.ok());
  CHECK(members.status().IsInvalidArgument());
  CHECK(clock.Now() == started);
}

TEST_CASE("two members of one name or one address in a provider's answer are retried to --timeout, not bad input") {
  struct Answers : DiscoveryProvider {
    std::vector<Member> members;
    Result<std::vector<Member>> Discover() override { return members; }
    std::string Describe() const override { return "test cloud"; }
  };
  const Member a{"a", {"http://10.0.0.1:2380"}, {}};
  for (const auto& c :
       {std::tuple{"the same name", Member{"a", {"http://10.0.0.2:2380"}, {}}, "member name 'a' appears twice"},
        std::tuple{"the same address", Member{"b", {"http://10.0.0.1:2380"}, {}},
                   "peer URL http://10.0.0.1:2380 is claimed by two members"}}) {
    // Not a structured binding: clang 14 (the sanitizer build) lets no lambda, INFO's, name one.
    const auto& [what, second, says] = c;
    INFO(std::get<0>(c));
    FakeClock clock;
    Config config;
    config.cluster_size = 2;
    config.timeout = seconds(3);
    auto answers = std::make_unique<Answers>();
    answers->members = {a, second};
    auto provider = CheckingAnswers(std::move(answers));
    auto once = provider->Discover();
    REQUIRE_FALSE(once.ok());
    CHECK(once.status().IsUnavailable());
    Backoff backoff(clock, kDiscoveryPollInterval, kDiscoveryPollInterval, clock.Now() + config.timeout);

    auto members = DiscoverExpected(*provider, config, backoff);

    REQUIRE_FALSE(members.ok());
    CHECK(members.status().code() == Status::Code::kDeadlineExceeded);
    CHECK_MESSAGE(members.status().message().find(says) != std::string::npos, members.status().message());
    CHECK(members.status().message().find("test cloud") != std::string::npos);
  }
}

}  // namespace
}  // namespace quorate
