#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "node/stray_etcd.h"
#include "quorate/fs.h"

namespace quorate {
namespace {

using std::chrono::milliseconds;

struct DataDir {
  DataDir() {
    char tmpl[] = "/tmp/quorate-stray-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    path = tmpl;
    REQUIRE(MakeDirs(path + "/member/wal").ok());
    wal = path + "/member/wal/0000000000000000-0000000000000000.wal";
    std::ofstream(wal) << "wal";
  }
  ~DataDir() { std::filesystem::remove_all(path); }
  std::string path;
  std::string wal;
};

// A stand-in for an etcd left running: holds `wal` open, with etcd's OFD write lock when `lock`,
// and reports through a pipe once it does. Ignores SIGTERM when `ignore_term`.
pid_t HoldWal(const std::string& wal, bool lock, bool ignore_term) {
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // Not the test runner's crash handler, which this fork inherited.
    ::signal(SIGTERM, ignore_term ? SIG_IGN : SIG_DFL);
    int fd = ::open(wal.c_str(), O_RDWR);
    struct flock whole {};
    whole.l_type = F_WRLCK;
    whole.l_whence = SEEK_SET;
    if (fd < 0 || (lock && ::fcntl(fd, F_OFD_SETLK, &whole) != 0)) ::_exit(1);
    char one = 1;
    ssize_t ignored = ::write(ready[1], &one, 1);
    (void)ignored;
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char one = 0;
  REQUIRE(::read(ready[0], &one, 1) == 1);
  ::close(ready[0]);
  return pid;
}

int WaitStatus(pid_t pid) {
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return status;
}

}  // namespace

TEST_CASE("an etcd left holding the data dir's WAL lock is stopped with SIGTERM") {
  DataDir dir;
  pid_t stray = HoldWal(dir.wal, /*lock=*/true, /*ignore_term=*/false);
  CHECK(StopStrayEtcd(dir.path).ok());
  int status = WaitStatus(stray);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGTERM);
}

TEST_CASE("a stray that ignores SIGTERM is SIGKILLed once the grace period is over") {
  DataDir dir;
  pid_t stray = HoldWal(dir.wal, /*lock=*/true, /*ignore_term=*/true);
  auto start = std::chrono::steady_clock::now();
  CHECK(StopStrayEtcd(dir.path, milliseconds(200)).ok());
  CHECK(std::chrono::steady_clock::now() - start >= milliseconds(200));
  int status = WaitStatus(stray);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
}

// A holder whose descriptor names another path (a hard link outside the WAL directory) is one the
// /proc scan cannot find, as an etcd in another PID namespace or of another user is.
TEST_CASE("a lock whose holder cannot be seen: waited for within the grace period, then named") {
  DataDir dir;
  const std::string link = dir.path + "/elsewhere.wal";
  REQUIRE(::link(dir.wal.c_str(), link.c_str()) == 0);

  SUBCASE("the holder exits meanwhile (an etcd killed a moment ago): its lock goes, nothing to stop") {
    pid_t holder = HoldWal(link, /*lock=*/true, /*ignore_term=*/false);
    std::thread killer([holder] {
      std::this_thread::sleep_for(milliseconds(150));
      ::kill(holder, SIGKILL);
    });
    Status s = StopStrayEtcd(dir.path, std::chrono::seconds(30));
    killer.join();
    CHECK_MESSAGE(s.ok(), s.message());
    WaitStatus(holder);
  }
  SUBCASE("the holder stays: FailedPrecondition naming the file, after the grace period") {
    pid_t holder = HoldWal(link, /*lock=*/true, /*ignore_term=*/false);
    Status s = StopStrayEtcd(dir.path, milliseconds(200));
    CHECK(s.code() == Status::Code::kFailedPrecondition);
    CHECK_MESSAGE(s.message().find("cannot see") != std::string::npos, s.message());
    CHECK(::kill(holder, 0) == 0);
    ::kill(holder, SIGKILL);
    WaitStatus(holder);
  }
}

TEST_CASE("nothing is stopped without a WAL lock: a reader of the WAL, an empty or missing data dir") {
  DataDir dir;
  pid_t reader = HoldWal(dir.wal, /*lock=*/false, /*ignore_term=*/false);
  CHECK(StopStrayEtcd(dir.path).ok());
  CHECK(::kill(reader, 0) == 0);
  ::kill(reader, SIGKILL);
  WaitStatus(reader);
  CHECK(StopStrayEtcd(dir.path + "/missing").ok());
}

}  // namespace quorate
