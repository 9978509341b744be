#include <doctest/doctest.h>

#include <signal.h>
#include <sys/prctl.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "node/supervisor.h"
#include "testing/fake_clock.h"
#include "testing/fake_process.h"

namespace quorate {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A supervisor on the fake launcher and clock, with every exit recorded.
struct FakeRig {
  FakeClock clock;
  FakeProcessLauncher launcher{clock};
  std::vector<SupervisorExit> exits;
  SupervisorOptions options;

  FakeRig() {
    options.spec = {{"etcd", "--name", "n1"}, {{"ETCD_DATA_DIR", "/data"}}, ""};
    options.launcher = &launcher;
    options.clock = &clock;
    options.reap_orphans = false;
  }
  std::vector<Clock::Duration> Backoffs() const {
    std::vector<Clock::Duration> out;
    for (const auto& e : exits) out.push_back(e.restart_in);
    return out;
  }
};

std::vector<Clock::Duration> Seconds(std::initializer_list<int> s) {
  std::vector<Clock::Duration> out;
  for (int v : s) out.push_back(seconds(v));
  return out;
}

TEST_CASE("a first crash is restarted at once, repeated ones after a backoff doubling from 1s to a 30s cap") {
  FakeRig rig;
  for (int i = 0; i < 8; ++i) rig.launcher.Plan(FakeRun::ExitAfter(seconds(1), ExitStatus::Exited(1)));
  Supervisor* sup = nullptr;
  rig.options.on_exit = [&](const SupervisorExit& e) { rig.exits.push_back(e); };
  rig.options.on_start = [&](const ChildProcess&) {
    if (rig.launcher.starts().size() == 9) sup->Stop();
  };
  Supervisor supervisor(rig.options);
  sup = &supervisor;
  REQUIRE(supervisor.Run().ok());

  REQUIRE(rig.exits.size() == 9);
  rig.exits.pop_back();  // the requested stop
  CHECK(rig.Backoffs() == Seconds({0, 1, 2, 4, 8, 16, 30, 30}));
  for (const auto& e : rig.exits) {
    CHECK(e.status == std::optional(ExitStatus::Exited(1)));
    CHECK(e.uptime == seconds(1));
    CHECK_FALSE(e.requested);
  }
  // The restarts really waited: each start is one second of run plus the backoff after the last.
  const auto& starts = rig.launcher.starts();
  for (size_t i = 0; i + 1 < starts.size(); ++i) {
    CHECK(starts[i + 1].at - starts[i].at == seconds(1) + rig.exits[i].restart_in);
  }
  SupervisorStats stats = supervisor.stats();
  CHECK(stats.starts == 9);
  CHECK(stats.restarts == 8);
  CHECK(stats.pid == 0);
  // The same spec every time, environment included.
  CHECK(starts.back().spec.argv == std::vector<std::string>{"etcd", "--name", "n1"});
  CHECK(starts.back().spec.env == rig.options.spec.env);
}

TEST_CASE("a crash after a run of 60s or more counts as a first crash: restarted at once") {
  FakeRig rig;
  for (int i = 0; i < 3; ++i) rig.launcher.Plan(FakeRun::ExitAfter(seconds(1), ExitStatus::Exited(1)));
  rig.launcher.Plan(FakeRun::ExitAfter(seconds(70), ExitStatus::Signaled(SIGSEGV)));
  rig.launcher.Plan(FakeRun::ExitAfter(seconds(1), ExitStatus::Exited(1)));
  Supervisor* sup = nullptr;
  rig.options.on_exit = [&](const SupervisorExit& e) {
    rig.exits.push_back(e);
    if (rig.exits.size() == 5) sup->Stop();
  };
  Supervisor supervisor(rig.options);
  sup = &supervisor;
  REQUIRE(supervisor.Run().ok());
  CHECK(rig.Backoffs() == Seconds({0, 1, 2, 0, 1}));
  const auto& starts = rig.launcher.starts();
  CHECK(starts[4].at - starts[3].at == seconds(70));
  CHECK(rig.exits[3].uptime == seconds(70));
  // Stopped during the backoff: nothing more was started.
  CHECK(rig.launcher.starts().size() == 5);
  CHECK(supervisor.stats().last_exit == ExitStatus::Exited(1));
}

TEST_CASE("stop forwards SIGTERM, then SIGKILLs a child that ignores it after the grace period") {
  FakeRig rig;
  rig.launcher.Plan(FakeRun::UntilSignalled(/*ignore_term=*/true));
  rig.options.stop_grace = seconds(10);
  rig.options.on_exit = [&](const SupervisorExit& e) { rig.exits.push_back(e); };
  Supervisor supervisor(rig.options);
  Clock::TimePoint t0 = rig.clock.Now();
  rig.clock.At(t0 + seconds(5), [&] { supervisor.Stop(); });
  REQUIRE(supervisor.Run().ok());

  const auto& signals = rig.launcher.signals();
  REQUIRE(signals.size() == 2);
  CHECK(signals[0].signal == SIGTERM);
  CHECK(signals[0].at == t0 + seconds(5));
  CHECK(signals[1].signal == SIGKILL);
  CHECK(signals[1].at == t0 + seconds(15));
  REQUIRE(rig.exits.size() == 1);
  CHECK(rig.exits[0].requested);
  CHECK(rig.exits[0].status == std::optional(ExitStatus::Signaled(SIGKILL)));
  CHECK(rig.launcher.starts().size() == 1);
}

TEST_CASE("stop waits for a child that honours SIGTERM, and sends nothing more") {
  FakeRig rig;
  Supervisor supervisor(rig.options);
  rig.clock.At(rig.clock.Now() + seconds(3), [&] { supervisor.Stop(); });
  REQUIRE(supervisor.Run().ok());
  REQUIRE(rig.launcher.signals().size() == 1);
  CHECK(rig.launcher.signals()[0].signal == SIGTERM);
  CHECK(supervisor.stats().last_exit == ExitStatus::Signaled(SIGTERM));
  CHECK(supervisor.stats().restarts == 0);
}

TEST_CASE("SIGTERM and SIGINT received by quorate are forwarded as they came") {
  for (int sig : {SIGTERM, SIGINT}) {
    CAPTURE(sig);
    FakeRig rig;
    rig.options.on_start = [&](const ChildProcess&) { ::kill(::getpid(), sig); };
    Supervisor supervisor(rig.options);
    REQUIRE(supervisor.Run().ok());
    REQUIRE(rig.launcher.signals().size() == 1);
    CHECK(rig.launcher.signals()[0].signal == sig);
    CHECK(supervisor.stats().last_exit == ExitStatus::Signaled(sig));
  }
}

TEST_CASE("an exit that comes with a stop is not restarted") {
  FakeRig rig;
  rig.options.on_exit = [&](const SupervisorExit& e) { rig.exits.push_back(e); };
  Supervisor supervisor(rig.options);
  rig.clock.At(rig.clock.Now() + seconds(2), [&] {
    rig.launcher.Exit(0, ExitStatus::Exited(0));
    supervisor.Stop();
  });
  REQUIRE(supervisor.Run().ok());
  CHECK(rig.launcher.starts().size() == 1);
  CHECK(rig.launcher.signals().empty());
  REQUIRE(rig.exits.size() == 1);
  CHECK(rig.exits[0].requested);
}

TEST_CASE("Stop before Run starts nothing") {
  FakeRig rig;
  Supervisor supervisor(rig.options);
  supervisor.Stop();
  REQUIRE(supervisor.Run().ok());
  CHECK(rig.launcher.starts().empty());
}

TEST_CASE("the first start failing ends Run; a failed restart is retried with backoff") {
  SUBCASE("first") {
    FakeRig rig;
    rig.launcher.Plan(FakeRun::FailStart(Status::NotFound("start etcd: No such file or directory")));
    Supervisor supervisor(rig.options);
    Status s = supervisor.Run();
    CHECK(s.IsNotFound());
    CHECK(s.message() == "start etcd: No such file or directory");
  }
  SUBCASE("later") {
    FakeRig rig;
    rig.launcher.Plan(FakeRun::ExitAfter(seconds(1), ExitStatus::Exited(2)));
    rig.launcher.Plan(FakeRun::FailStart(Status::Internal("start etcd: Resource temporarily unavailable")));
    Supervisor* sup = nullptr;
    rig.options.on_exit = [&](const SupervisorExit& e) { rig.exits.push_back(e); };
    rig.options.on_start = [&](const ChildProcess&) {
      if (rig.launcher.starts().size() == 2) sup->Stop();
    };
    Supervisor supervisor(rig.options);
    sup = &supervisor;
    REQUIRE(supervisor.Run().ok());
    REQUIRE(rig.exits.size() == 3);
    CHECK_FALSE(rig.exits[1].status.has_value());
    CHECK(rig.exits[1].start_error.message() == "start etcd: Resource temporarily unavailable");
    CHECK(rig.Backoffs() == Seconds({0, 1, 0}));
    CHECK(supervisor.stats().restarts == 1);
  }
}

TEST_CASE("before_restart may change the spec, or end the run with its error") {
  FakeRig rig;
  for (int i = 0; i < 3; ++i) rig.launcher.Plan(FakeRun::ExitAfter(seconds(1), ExitStatus::Exited(1)));
  int calls = 0;
  rig.options.before_restart = [&](LaunchSpec& spec) {
    if (++calls == 3) return Status::FailedPrecondition("data dir /data is not usable");
    spec.argv.push_back("--initial-cluster-state=existing");
    return Status::Ok();
  };
  Supervisor supervisor(rig.options);
  Status s = supervisor.Run();
  CHECK(s.message() == "data dir /data is not usable");
  const auto& starts = rig.launcher.starts();
  REQUIRE(starts.size() == 3);
  CHECK(starts[0].spec.argv.size() == 3);
  CHECK(starts[2].spec.argv.size() == 5);
}

TEST_CASE("before_restart may defer a restart with Unavailable: asked again after the next backoff") {
  FakeRig rig;
  rig.launcher.Plan(FakeRun::ExitAfter(seconds(1), ExitStatus::Exited(0)));
  std::vector<Clock::TimePoint> asked;
  rig.options.before_restart = [&](LaunchSpec&) {
    asked.push_back(rig.clock.Now());
    return asked.size() < 3 ? Status::Unavailable("member 1 was removed") : Status::Ok();
  };
  Supervisor* sup = nullptr;
  rig.options.on_start = [&](const ChildProcess&) {
    if (rig.launcher.starts().size() == 2) sup->Stop();
  };
  Supervisor supervisor(rig.options);
  sup = &supervisor;
  REQUIRE(supervisor.Run().ok());
  const auto& starts = rig.launcher.starts();
  REQUIRE(starts.size() == 2);
  REQUIRE(asked.size() == 3);
  // Exit at 1s, asked at once, deferred for 1s, then 2s: started again at 4s.
  CHECK(asked[0] - starts[0].at == seconds(1));
  CHECK(asked[1] - asked[0] == seconds(1));
  CHECK(asked[2] - asked[1] == seconds(2));
  CHECK(starts[1].at == asked[2]);
  CHECK(supervisor.stats().restarts == 1);
}

TEST_CASE("a stop while a restart is deferred ends Run at once, starting nothing") {
  FakeRig rig;
  rig.launcher.Plan(FakeRun::ExitAfter(seconds(1), ExitStatus::Exited(0)));
  Supervisor* sup = nullptr;
  int asked = 0;
  rig.options.before_restart = [&](LaunchSpec&) {
    if (++asked == 2) sup->Stop();
    return Status::Unavailable("member 1 was removed");
  };
  Supervisor supervisor(rig.options);
  sup = &supervisor;
  REQUIRE(supervisor.Run().ok());
  CHECK(asked == 2);
  CHECK(rig.launcher.starts().size() == 1);
}

TEST_CASE("RequestRestart stops the child with SIGTERM and starts it again at once, through before_restart") {
  FakeRig rig;
  // Two crash-loop exits first: the backoff they built up must not delay the requested restart.
  rig.launcher.Plan(FakeRun::ExitAfter(seconds(1), ExitStatus::Exited(1)));
  rig.launcher.Plan(FakeRun::ExitAfter(seconds(1), ExitStatus::Exited(1)));
  rig.launcher.Plan(FakeRun::UntilSignalled(false));
  Supervisor* sup = nullptr;
  int asked = 0;
  rig.options.before_restart = [&](LaunchSpec& spec) {
    ++asked;
    spec.argv.back() = "n" + std::to_string(asked + 1);
    return Status::Ok();
  };
  rig.options.on_exit = [&](const SupervisorExit& e) { rig.exits.push_back(e); };
  rig.options.on_start = [&](const ChildProcess&) {
    size_t n = rig.launcher.starts().size();
    if (n == 3) rig.clock.At(rig.clock.Now() + seconds(5), [&] { sup->RequestRestart(); });
    if (n == 4) sup->Stop();
  };
  Supervisor supervisor(rig.options);
  sup = &supervisor;
  REQUIRE(supervisor.Run().ok());
  const auto& starts = rig.launcher.starts();
  REQUIRE(starts.size() == 4);
  REQUIRE(rig.exits.size() == 4);
  const SupervisorExit& restarted = rig.exits[2];
  CHECK(restarted.restart_requested);
  CHECK_FALSE(restarted.requested);
  CHECK(restarted.restart_in == Clock::Duration::zero());
  CHECK(restarted.status == std::optional(ExitStatus::Signaled(SIGTERM)));
  // Started again at the moment the third child ended, with the spec before_restart made.
  CHECK(starts[3].at == starts[2].at + seconds(5));
  CHECK(starts[3].spec.argv.back() == "n4");
  CHECK(asked == 3);
  CHECK(rig.launcher.signals().front().signal == SIGTERM);
  CHECK(rig.exits[3].requested);
  CHECK_FALSE(rig.exits[3].restart_requested);
}

TEST_CASE("RequestRestart while no child runs is met by the next start, and a stop wins over it") {
  FakeRig rig;
  rig.launcher.Plan(FakeRun::UntilSignalled(false));
  Supervisor* sup = nullptr;
  rig.options.on_exit = [&](const SupervisorExit& e) { rig.exits.push_back(e); };
  rig.options.on_start = [&](const ChildProcess&) {
    rig.clock.At(rig.clock.Now() + seconds(1), [&] {
      sup->RequestRestart();
      sup->Stop();
    });
  };
  Supervisor supervisor(rig.options);
  sup = &supervisor;
  supervisor.RequestRestart();  // before Run: the first start reads everything anyway
  REQUIRE(supervisor.Run().ok());
  CHECK(rig.launcher.starts().size() == 1);
  REQUIRE(rig.exits.size() == 1);
  CHECK(rig.exits[0].requested);
  CHECK_FALSE(rig.exits[0].restart_requested);
}

// Real processes: short ones only, and no test waits on a timer longer than a fraction of a second.

// True once `pid` ignores `sig` (field SigIgn of /proc/PID/status), so a stop cannot race its trap.
bool WaitIgnoring(pid_t pid, int sig) {
  for (int i = 0; i < 1000; ++i) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("SigIgn:", 0) == 0) {
        unsigned long long mask = std::stoull(line.substr(7), nullptr, 16);
        if (mask & (1ULL << (sig - 1))) return true;
      }
    }
    std::this_thread::sleep_for(milliseconds(2));
  }
  return false;
}

TEST_CASE("real: a child killed with SIGKILL is restarted, then stopped with SIGTERM") {
  SupervisorOptions options;
  options.spec = {{"sleep", "30"}, {}, ""};
  options.initial_backoff = milliseconds(10);
  options.reap_orphans = false;
  std::vector<SupervisorExit> exits;
  Supervisor* sup = nullptr;
  pid_t first_pid = 0;
  options.on_start = [&](const ChildProcess& child) {
    if (first_pid == 0) {
      first_pid = child.pid();
      ::kill(child.pid(), SIGKILL);
    } else {
      CHECK(child.pid() != first_pid);
      sup->Stop();
    }
  };
  options.on_exit = [&](const SupervisorExit& e) { exits.push_back(e); };
  Supervisor supervisor(options);
  sup = &supervisor;
  REQUIRE(supervisor.Run().ok());
  REQUIRE(exits.size() == 2);
  CHECK(exits[0].status == std::optional(ExitStatus::Signaled(SIGKILL)));
  CHECK(exits[0].restart_in == Clock::Duration::zero());
  CHECK(exits[1].requested);
  CHECK(exits[1].status == std::optional(ExitStatus::Signaled(SIGTERM)));
  CHECK(supervisor.stats().restarts == 1);
}

TEST_CASE("real: stop SIGKILLs a child that traps SIGTERM once the grace period is over") {
  SupervisorOptions options;
  // exec keeps the ignored SIGTERM and leaves no grandchild behind after the SIGKILL.
  options.spec = {{"/bin/sh", "-c", "trap '' TERM; exec sleep 30"}, {}, ""};
  options.stop_grace = milliseconds(200);
  options.reap_orphans = false;
  Supervisor* sup = nullptr;
  options.on_start = [&](const ChildProcess& child) {
    REQUIRE(WaitIgnoring(child.pid(), SIGTERM));
    sup->Stop();
  };
  std::optional<SupervisorExit> exit;
  options.on_exit = [&](const SupervisorExit& e) { exit = e; };
  Supervisor supervisor(options);
  sup = &supervisor;
  REQUIRE(supervisor.Run().ok());
  REQUIRE(exit.has_value());
  CHECK(exit->status == std::optional(ExitStatus::Signaled(SIGKILL)));
  CHECK(exit->uptime >= milliseconds(200));
  CHECK(exit->uptime < seconds(5));
}

TEST_CASE("real: a SIGTERM to quorate reaches the child, and a PID 1 supervisor reaps orphans") {
  // As a subreaper this test process stands in for PID 1.
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  SupervisorOptions options;
  // The subshell leaves an orphan that exits at once; etcd's stand-in keeps running.
  options.spec = {{"/bin/sh", "-c", "(sleep 0.01 &); exec sleep 30"}, {}, ""};
  options.reap_orphans = true;
  Supervisor supervisor(options);
  Status result;
  std::thread runner([&] { result = supervisor.Run(); });
  bool reaped = false;
  for (int i = 0; i < 1000 && !reaped; ++i) {
    reaped = supervisor.stats().orphans_reaped >= 1;
    if (!reaped) std::this_thread::sleep_for(milliseconds(5));
  }
  CHECK(reaped);
  CHECK(supervisor.stats().pid != 0);
  ::kill(::getpid(), SIGTERM);
  runner.join();
  CHECK(result.ok());
  CHECK(supervisor.stats().orphans_reaped == 1);
  CHECK(supervisor.stats().last_exit == ExitStatus::Signaled(SIGTERM));
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 0) == 0);
}

}  // namespace
}  // namespace quorate
