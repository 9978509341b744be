#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

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
