#include <doctest/doctest.h>

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "node/process.h"

namespace quorate {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

std::unique_ptr<ChildProcess> MustStart(LaunchSpec spec) {
  auto child = RealProcessLauncher().Start(spec);
  REQUIRE_MESSAGE(child.ok(), child.status().message());
  return std::move(*child);
}

ExitStatus MustExit(ChildProcess& child) {
  auto exit = child.Wait(seconds(10));
  REQUIRE(exit.ok());
  REQUIRE(exit->has_value());
  return **exit;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("quorate-process-test-" + std::to_string(getpid()) + "-" + name))
      .string();
}

TEST_CASE("a child's exit code comes back as its exit status") {
  auto child = MustStart({{"/bin/sh", "-c", "exit 3"}, {}, ""});
  CHECK(child->pid() > 0);
  ExitStatus exit = MustExit(*child);
  CHECK(exit == ExitStatus::Exited(3));
  CHECK(exit.ToString() == "exit code 3");
  CHECK(child->exit_status() == ExitStatus::Exited(3));
}

TEST_CASE("a child killed by a signal reports the signal, and cannot be signalled after") {
  auto child = MustStart({{"sleep", "30"}, {}, ""});
  REQUIRE(child->Signal(SIGKILL).ok());
  ExitStatus exit = MustExit(*child);
  CHECK(exit == ExitStatus::Signaled(SIGKILL));
  CHECK(exit.ToString() == "killed by SIGKILL");
  Status again = child->Signal(SIGTERM);
  CHECK(again.code() == Status::Code::kFailedPrecondition);
  CHECK(again.message().find("has exited") != std::string::npos);
}

TEST_CASE("waiting times out while the child runs, and destroying it kills it") {
  auto child = MustStart({{"sleep", "30"}, {}, ""});
  pid_t pid = child->pid();
  auto exit = child->Wait(milliseconds(20));
  REQUIRE(exit.ok());
  CHECK_FALSE(exit->has_value());
  child.reset();
  CHECK(::kill(pid, 0) != 0);
}

TEST_CASE("the child gets exactly the environment given, nothing of quorate's own, and output goes to the log") {
  ::setenv("QUORATE_TEST_SECRET", "secret", 1);
  std::string log = TempPath("env.log");
  std::filesystem::remove(log);
  auto child = MustStart({{"/bin/sh", "-c", "echo \"$QUORATE_TEST_GIVEN/${QUORATE_TEST_SECRET-not passed}\"; echo to-stderr >&2"},
                          {{"QUORATE_TEST_GIVEN", "given"}},
                          log});
  CHECK(MustExit(*child).success());
  CHECK(ReadFile(log) == "given/not passed\nto-stderr\n");
  struct stat st;
  REQUIRE(::stat(log.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  std::filesystem::remove(log);
  ::unsetenv("QUORATE_TEST_SECRET");
}

TEST_CASE("a child gets SIGTERM when the process that started it dies, even by SIGKILL") {
  // A stand-in for quorate: a process that starts a child through the launcher, reports its pid, and
  // is then SIGKILLed, as `kill -9` of quorate run.
  int report[2];
  REQUIRE(::pipe(report) == 0);
  pid_t quorate = ::fork();
  REQUIRE(quorate >= 0);
  if (quorate == 0) {
    ::close(report[0]);
    auto child = RealProcessLauncher().Start({{"sleep", "30"}, {}, ""});
    pid_t pid = child.ok() ? (*child)->pid() : -1;
    ssize_t ignored = ::write(report[1], &pid, sizeof pid);
    (void)ignored;
    ::pause();
    ::_exit(0);
  }
  ::close(report[1]);
  pid_t orphan = 0;
  REQUIRE(::read(report[0], &orphan, sizeof orphan) == sizeof orphan);
  ::close(report[0]);
  REQUIRE(orphan > 0);
  int orphan_fd = static_cast<int>(::syscall(SYS_pidfd_open, orphan, 0));
  REQUIRE(orphan_fd >= 0);
  ::kill(quorate, SIGKILL);
  ::waitpid(quorate, nullptr, 0);
  // The orphan is re-parented (to init, which reaps it): its pidfd turns readable when it exits.
  pollfd p{orphan_fd, POLLIN, 0};
  CHECK(::poll(&p, 1, 10000) == 1);
  ::close(orphan_fd);
}

TEST_CASE("a child gets default signal handling even when quorate blocks SIGTERM") {
  sigset_t term, old;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  REQUIRE(pthread_sigmask(SIG_BLOCK, &term, &old) == 0);
  auto child = MustStart({{"sleep", "30"}, {}, ""});
  REQUIRE(pthread_sigmask(SIG_SETMASK, &old, nullptr) == 0);
  REQUIRE(child->Signal(SIGTERM).ok());
  CHECK(MustExit(*child) == ExitStatus::Signaled(SIGTERM));
}

TEST_CASE("a program that cannot start is an error naming it") {
  auto missing = RealProcessLauncher().Start({{"/nonexistent/etcd", "--name", "n1"}, {}, ""});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().IsNotFound());
  CHECK(missing.status().message().find("/nonexistent/etcd") != std::string::npos);

  auto not_on_path = RealProcessLauncher().Start({{"quorate-no-such-program"}, {}, ""});
  REQUIRE_FALSE(not_on_path.ok());
  CHECK(not_on_path.status().message().find("quorate-no-such-program") != std::string::npos);

  auto empty = RealProcessLauncher().Start({});
  CHECK(empty.status().IsInvalidArgument());

  auto bad_env = RealProcessLauncher().Start({{"true"}, {{"A=B", "c"}}, ""});
  CHECK(bad_env.status().IsInvalidArgument());
  CHECK(bad_env.status().message().find("'A=B'") != std::string::npos);

  auto bad_log = RealProcessLauncher().Start({{"true"}, {}, "/nonexistent/dir/etcd.log"});
  REQUIRE_FALSE(bad_log.ok());
  CHECK(bad_log.status().message().find("/nonexistent/dir/etcd.log") != std::string::npos);
}

TEST_CASE("ReapOrphans reaps re-parented orphans and keeps an owned child's status for its owner") {
  // As a subreaper this test process stands in for PID 1: orphans of its children come to it.
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  auto owned = MustStart({{"/bin/sh", "-c", "exit 7"}, {}, ""});
  auto parent = MustStart({{"/bin/sh", "-c", "(sleep 0.01 &); exit 0"}, {}, ""});
  CHECK(MustExit(*parent).success());

  // The owned child becomes a zombie before the reaper runs, so the reaper is the one to collect it.
  pollfd p{owned->exit_fd(), POLLIN, 0};
  REQUIRE(::poll(&p, 1, 10000) == 1);
  int orphans = 0;
  for (int i = 0; i < 500 && orphans == 0; ++i) {
    orphans += ReapOrphans();
    if (orphans == 0) ::poll(nullptr, 0, 10);
  }
  CHECK(orphans == 1);
  auto status = owned->Poll();
  REQUIRE(status.ok());
  CHECK(*status == std::optional(ExitStatus::Exited(7)));
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 0) == 0);
}

TEST_CASE("signal names") {
  CHECK(SignalName(SIGTERM) == "SIGTERM");
  CHECK(SignalName(SIGINT) == "SIGINT");
  CHECK(ExitStatus::Signaled(SIGTERM).ToString() == "killed by SIGTERM");
  CHECK(ExitStatus::Exited(0).success());
  CHECK_FALSE(ExitStatus::Signaled(SIGTERM).success());
}

}  // namespace
}  // namespace quorate
