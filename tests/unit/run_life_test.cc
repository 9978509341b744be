#include <doctest/doctest.h>

#include "node/run_life.h"

namespace quorate {
namespace {

// What upkeep's last round would say: asked only while etcd runs.
struct EtcdReady {
  Status answer = Status::Ok();
  int asked = 0;
  std::function<Status()> fn() {
    return [this] {
      ++asked;
      return answer;
    };
  }
};

TEST_CASE("deciding how to start etcd is alive and not ready") {
  RunLife life;
  EtcdReady etcd;
  CHECK(life.state() == RunState::kDeciding);
  CHECK(life.Live().ok());
  CHECK(life.Ready(etcd.fn()).message() == "deciding how to start etcd");
  CHECK(etcd.asked == 0);
}

TEST_CASE("starting etcd is alive and not ready") {
  RunLife life;
  EtcdReady etcd;
  life.Set(RunState::kStarting);
  CHECK(life.Live().ok());
  CHECK(life.Ready(etcd.fn()).IsUnavailable());
  CHECK(etcd.asked == 0);
}

TEST_CASE("a running etcd is alive, and ready as upkeep's last round says") {
  RunLife life;
  EtcdReady etcd;
  life.Set(RunState::kRunning);
  CHECK(life.Live().ok());
  CHECK(life.Ready(etcd.fn()).ok());
  etcd.answer = Status::Unavailable("member 8e9e05c52164694d is a learner");
  CHECK(life.Ready(etcd.fn()).message() == "member 8e9e05c52164694d is a learner");
  CHECK(etcd.asked == 2);
}

TEST_CASE("an exited etcd waiting out its backoff is neither alive nor ready, saying how it ended") {
  RunLife life;
  EtcdReady etcd;
  life.Set(RunState::kExited, "exit code 2");
  CHECK(life.Live().message() == "etcd is not running; it last ended with exit code 2");
  CHECK(life.Ready(etcd.fn()).message() == "etcd is not running; it last ended with exit code 2");
  CHECK(etcd.asked == 0);
}

TEST_CASE("deciding again before a restart is alive and not ready") {
  RunLife life;
  EtcdReady etcd;
  life.Set(RunState::kRedeciding);
  CHECK(life.Live().ok());
  CHECK(life.Ready(etcd.fn()).IsUnavailable());
  CHECK(etcd.asked == 0);
}

TEST_CASE("held is alive, so a liveness probe never turns a removal into a rejoin, and not ready, saying why") {
  RunLife life;
  EtcdReady etcd;
  life.Set(RunState::kHeld, "member 1 was removed from the cluster");
  CHECK(life.Live().ok());
  CHECK(life.Ready(etcd.fn()).message() == "member 1 was removed from the cluster");
  CHECK(etcd.asked == 0);
}

TEST_CASE("Set says whether anything changed: a hold asked again for the same reason is no new decision") {
  RunLife life;
  CHECK(life.Set(RunState::kHeld, "peers not answering"));
  CHECK_FALSE(life.Set(RunState::kHeld, "peers not answering"));
  CHECK(life.Set(RunState::kHeld, "member 1 was removed from the cluster"));
  CHECK(life.Set(RunState::kStarting));
  CHECK_FALSE(life.Set(RunState::kStarting));
}

}  // namespace
}  // namespace quorate
