#include "quorate/fs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <fmt/format.h>

namespace quorate {
namespace {

Status FsyncPath(const std::string& path, int flags) {
  int fd = open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "open " + path);
  int rc = fsync(fd);
  int err = errno;
  close(fd);
  return rc == 0 ? Status::Ok() : Status::FromErrno(err, "fsync " + path);
}

}  // namespace

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::FromErrno(errno, "read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::FromErrno(errno, "read " + path);
  return ss.str();
}

Result<std::string> WriteHiddenTemp(const std::string& path, const std::string& content, int mode) {
  std::filesystem::path p(path);
  std::string dir = p.parent_path().empty() ? "." : p.parent_path().string();
  if (Status s = MakeDirs(dir); !s.ok()) return s;
  thread_local std::mt19937_64 random{std::random_device{}()};
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; fd < 0 && attempt < 8; ++attempt) {
    tmp = fmt::format("{}/.{}.tmp-{:016x}", dir, p.filename().string(), random());
    fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) return Status::FromErrno(errno, "create " + tmp);
  auto fail = [&](const char* what) {
    int err = errno;
    close(fd);
    unlink(tmp.c_str());
    return Status::FromErrno(err, std::string(what) + " " + tmp);
  };
  for (size_t written = 0; written < content.size();) {
    ssize_t n = write(fd, content.data() + written, content.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail("write");
    written += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) return fail("fsync");
  if (close(fd) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    return Status::FromErrno(err, "close " + tmp);
  }
  return tmp;
}

Status SyncDir(const std::string& dir) { return FsyncPath(dir.empty() ? "." : dir, O_RDONLY | O_DIRECTORY); }

Status WriteFileAtomic(const std::string& path, const std::string& content, int mode) {
  auto tmp = WriteHiddenTemp(path, content, mode);
  if (!tmp.ok()) return tmp.status();
  if (rename(tmp->c_str(), path.c_str()) != 0) {
    int err = errno;
    unlink(tmp->c_str());
    return Status::FromErrno(err, "rename " + *tmp + " to " + path);
  }
  return SyncDir(std::filesystem::path(path).parent_path().string());
}

Status MakeDirs(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return Status::FromErrno(ec.value(), "create directory " + path);
  return Status::Ok();
}

bool PathExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

Result<std::string> MoveAside(const std::string& path, const std::string& suffix) {
  std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", std::gmtime(&now));
  std::string target = fmt::format("{}.{}-{}", path, suffix, stamp);
  for (int i = 1; PathExists(target); ++i) target = fmt::format("{}.{}-{}.{}", path, suffix, stamp, i);
  if (rename(path.c_str(), target.c_str()) != 0) {
    return Status::FromErrno(errno, "move " + path + " aside to " + target);
  }
  return target;
}

}  // namespace quorate
