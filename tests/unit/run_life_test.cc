#include <doctest/doctest.h>

#include <optional>

#include "node/run_life.h"

namespace quorate {
namespace {

TEST_CASE("each state of quorate run's life answers /healthz and /readyz as DESIGN §5's table says") {
  struct Row {
    RunState state;
    std::string why;
    std::optional<std::string> live;  // nullopt: alive (200), else /healthz's 503 reason
    std::string ready;                // /readyz's 503 reason; empty: upkeep's answer, asked only here
  };
  const Row rows[] = {
      // Deciding, starting, deciding again and held may last far longer than a liveness probe's
      // patience: a restart of quorate then would cut a membership change short or turn a removal
      // into a rejoin.
      {RunState::kDeciding, "", std::nullopt, "deciding how to start etcd"},
      {RunState::kStarting, "", std::nullopt, "etcd is starting"},
      {RunState::kRunning, "", std::nullopt, ""},
      {RunState::kExited, "exit code 2", "etcd is not running; it last ended with exit code 2",
       "etcd is not running; it last ended with exit code 2"},
      {RunState::kRedeciding, "", std::nullopt, "etcd is not running; deciding again how to start it"},
      {RunState::kHeld, "member 1 was removed from the cluster", std::nullopt, "member 1 was removed from the cluster"},
  };
  for (const Row& row : rows) {
    CAPTURE(row.ready);
    RunLife life;
    life.Set(row.state, row.why);
    int asked = 0;
    const Status upkeep = Status::Unavailable("member 8e9e05c52164694d is a learner");
    auto etcd_ready = [&] {
      ++asked;
      return upkeep;
    };
    Status live = life.Live();
    if (row.live) {
      CHECK(live.IsUnavailable());
      CHECK(live.message() == *row.live);
    } else {
      CHECK(live.ok());
    }
    Status ready = life.Ready(etcd_ready);
    CHECK(ready.IsUnavailable());
    CHECK(ready.message() == (row.ready.empty() ? upkeep.message() : row.ready));
    CHECK(asked == (row.ready.empty() ? 1 : 0));
  }
}

TEST_CASE("a running etcd is ready once upkeep's round says so") {
  RunLife life;
  life.Set(RunState::kRunning);
  CHECK(life.Ready([] { return Status::Ok(); }).ok());
}

TEST_CASE("Set says whether anything changed: a hold asked again for the same reason is no new decision") {
  RunLife life;
  CHECK(life.state() == RunState::kDeciding);
  CHECK(life.Set(RunState::kHeld, "peers not answering"));
  CHECK_FALSE(life.Set(RunState::kHeld, "peers not answering"));
  CHECK(life.Set(RunState::kHeld, "member 1 was removed from the cluster"));
  CHECK(life.state() == RunState::kHeld);
  CHECK(life.Set(RunState::kStarting));
  CHECK_FALSE(life.Set(RunState::kStarting));
}

}  // namespace
}  // namespace quorate
