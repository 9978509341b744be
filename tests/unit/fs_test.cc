#include <doctest/doctest.h>

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "quorate/fs.h"
#include "testing/fifo_trap.h"

namespace quorate {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

struct TempDir {
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "quorate-fs-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() { fs::remove_all(path); }
  std::string path;
};

// A file of `size` bytes that uses no disk: a hole.
void MakeSparse(const std::string& path, off_t size) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, size) == 0);
  ::close(fd);
}

mode_t ModeOf(const std::string& path) {
  struct stat st;
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

}  // namespace

TEST_CASE("ReadFile refuses a FIFO at once instead of waiting for a writer") {
  TempDir dir;
  const std::string fifo = dir.path + "/bucket.json";
  REQUIRE(MakeFifo(fifo));
  for (bool whole : {true, false}) {
    CAPTURE(whole);
    Result<std::string> got = Status::Internal("not read");
    CHECK(FinishesWithin(seconds(5), fifo, [&] { got = whole ? ReadFile(fifo) : ReadFileHead(fifo, 4096); }));
    CHECK(got.status().code() == Status::Code::kDataLoss);
    CHECK(got.status().message().find(fifo + " is a FIFO") != std::string::npos);
  }
}

TEST_CASE("ReadFile refuses a file above its cap before reading it, and what is not a file") {
  TempDir dir;
  const std::string huge = dir.path + "/huge";
  MakeSparse(huge, off_t{1} << 30);
  auto got = ReadFile(huge);
  CHECK(got.status().code() == Status::Code::kDataLoss);
  CHECK(got.status().message().find(huge + " is 1073741824 bytes, more than the 4194304 quorate accepts there") !=
        std::string::npos);
  // The cap is the caller's; a head is read whatever the size.
  std::ofstream(dir.path + "/small") << "0123456789";
  CHECK(ReadFile(dir.path + "/small", 9).status().code() == Status::Code::kDataLoss);
  CHECK(*ReadFile(dir.path + "/small", 10) == "0123456789");
  CHECK(*ReadFileHead(dir.path + "/small", 4) == "0123");
  CHECK(ReadFileHead(huge, 8)->size() == 8);
  CHECK(*ReadFile(dir.path + "/small") == "0123456789");
  CHECK(ReadFile(dir.path + "/missing").status().IsNotFound());
  auto directory = ReadFile(dir.path);
  CHECK(directory.status().message().find(dir.path + " is a directory") != std::string::npos);
  // Files that report no size (procfs) are read to their end.
  CHECK(ReadFile("/proc/self/status")->find("Pid:") != std::string::npos);
}

TEST_CASE("local state is private: directories 0700, files 0600, whatever the umask") {
  TempDir dir;
  mode_t old = ::umask(0);
  const std::string state = dir.path + "/data/quorate";
  Status made = MakeDirs(state);
  Status written = WriteFileAtomic(state + "/bucket.json", "{}");
  Status nested = WriteFileAtomic(dir.path + "/other/etcd.env", "A=1\n");
  ::umask(old);
  REQUIRE(made.ok());
  REQUIRE(written.ok());
  REQUIRE(nested.ok());
  CHECK(ModeOf(dir.path + "/data") == 0700);
  CHECK(ModeOf(state) == 0700);
  CHECK(ModeOf(state + "/bucket.json") == 0600);
  CHECK(ModeOf(dir.path + "/other") == 0700);
  CHECK(ModeOf(dir.path + "/other/etcd.env") == 0600);
  // A shared store asks for readable records, and gets directories others can search.
  REQUIRE(WriteFileAtomic(dir.path + "/shared/tok/sealed", "{}", 0644).ok());
  CHECK(ModeOf(dir.path + "/shared/tok") == 0755);
  CHECK(ModeOf(dir.path + "/shared/tok/sealed") == 0644);
  // Existing directories keep their mode; a file in the way is an error naming it.
  REQUIRE(::chmod(state.c_str(), 0750) == 0);
  CHECK(MakeDirs(state + "/sub").ok());
  CHECK(ModeOf(state) == 0750);
  Status blocked = MakeDirs(state + "/bucket.json/x");
  CHECK_FALSE(blocked.ok());
  CHECK(blocked.message().find(state + "/bucket.json") != std::string::npos);
}

TEST_CASE("WriteFileIfChanged writes only when the content differs, and leaves the same file alone") {
  TempDir dir;
  std::string path = dir.path + "/etcd.env";
  REQUIRE(WriteFileIfChanged(path, "A=1\n").value());
  struct stat before;
  REQUIRE(stat(path.c_str(), &before) == 0);
  CHECK_FALSE(WriteFileIfChanged(path, "A=1\n").value());
  struct stat after;
  REQUIRE(stat(path.c_str(), &after) == 0);
  CHECK(after.st_ino == before.st_ino);  // not replaced by a rename
  CHECK(WriteFileIfChanged(path, "A=2\n").value());
  CHECK(ReadFile(path).value() == "A=2\n");
  // A directory the writer cannot create into: an unchanged file still needs no write at all.
  REQUIRE(chmod(dir.path.c_str(), 0500) == 0);
  if (geteuid() != 0) {
    CHECK_FALSE(WriteFileIfChanged(path, "A=2\n").value());
    CHECK_FALSE(WriteFileIfChanged(path, "A=3\n").ok());
  }
  REQUIRE(chmod(dir.path.c_str(), 0700) == 0);
}

}  // namespace quorate
