#include "quorate/fs.h"

#include <fcntl.h>
#include <sys/types.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <filesystem>
#include <random>

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

const char* KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

// The type is checked on the open descriptor, so nothing can be swapped in between the check and
// the read.
Result<std::string> ReadOpen(int fd, const std::string& path, size_t max_bytes, bool whole) {
  struct stat st;
  if (fstat(fd, &st) != 0) return Status::FromErrno(errno, "stat " + path);
  if (!S_ISREG(st.st_mode)) {
    return Status::DataLoss(fmt::format("{} is {}, not a file quorate can read", path, KindOf(st.st_mode)));
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (whole && size > max_bytes) return TooLargeToRead(path, size, max_bytes);
  // One byte past the cap shows a file that grew after fstat.
  const size_t limit = whole ? max_bytes + 1 : max_bytes;
  std::string out(std::min<uint64_t>(size, limit), '\0');
  size_t got = 0;
  for (;;) {
    if (got == out.size()) {
      if (got == limit) break;
      out.resize(std::min(limit, got + 4096));
    }
    ssize_t n = read(fd, out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno(errno, "read " + path);
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  out.resize(got);
  if (whole && got > max_bytes) return TooLargeToRead(path, got, max_bytes);
  return out;
}

// O_NONBLOCK: opening a FIFO without a writer would otherwise wait forever.
Result<std::string> ReadRegular(const std::string& path, size_t max_bytes, bool whole) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!fd) return Status::FromErrno(errno, "read " + path);
  return ReadOpen(fd.get(), path, max_bytes, whole);
}

}  // namespace

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) close(fd_);
  fd_ = fd;
}

Result<std::string> ReadOpenFile(int fd, const std::string& where, size_t max_bytes) {
  return ReadOpen(fd, where, max_bytes, /*whole=*/true);
}

Result<std::string> ReadFile(const std::string& path, size_t max_bytes) {
  return ReadRegular(path, max_bytes, /*whole=*/true);
}

Result<std::string> ReadFileHead(const std::string& path, size_t max_bytes) {
  return ReadRegular(path, max_bytes, /*whole=*/false);
}

Status TooLargeToRead(const std::string& where, uint64_t size, size_t max_bytes) {
  return Status::DataLoss(fmt::format("{} is {} bytes, more than the {} quorate accepts there: it is not a file meant "
                                      "for quorate; move it aside",
                                      where, size, max_bytes));
}

Result<std::string> WriteHiddenTempAt(int dir_fd, const std::string& dir, const std::string& name,
                                      const std::string& content, int mode) {
  thread_local std::mt19937_64 random{std::random_device{}()};
  std::string tmp;
  int fd = -1;
  // O_EXCL: a name taken by anything, a planted link included, is never opened.
  for (int attempt = 0; fd < 0 && attempt < 8; ++attempt) {
    tmp = fmt::format(".{}.tmp-{:016x}", name, random());
    fd = openat(dir_fd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) return Status::FromErrno(errno, "create " + dir + "/" + tmp);
  auto fail = [&](const char* what) {
    int err = errno;
    close(fd);
    unlinkat(dir_fd, tmp.c_str(), 0);
    return Status::FromErrno(err, std::string(what) + " " + dir + "/" + tmp);
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
    unlinkat(dir_fd, tmp.c_str(), 0);
    return Status::FromErrno(err, "close " + dir + "/" + tmp);
  }
  return tmp;
}

Result<std::string> WriteHiddenTemp(const std::string& path, const std::string& content, int mode) {
  std::filesystem::path p(path);
  std::string dir = p.parent_path().empty() ? "." : p.parent_path().string();
  // Those who may read the file may reach it.
  if (Status s = MakeDirs(dir, mode | ((mode & 0444) >> 2)); !s.ok()) return s;
  UniqueFd dir_fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir_fd) return Status::FromErrno(errno, "open " + dir);
  auto tmp = WriteHiddenTempAt(dir_fd.get(), dir, p.filename().string(), content, mode);
  if (!tmp.ok()) return tmp.status();
  return dir + "/" + *tmp;
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

Result<bool> WriteFileIfChanged(const std::string& path, const std::string& content, int mode) {
  // Compared with what is there (read as any local state is: no FIFO, a size cap), so a node
  // restarting etcd with nothing changed writes nothing, which a full disk would refuse.
  if (auto current = ReadFile(path, content.size()); current.ok() && *current == content) return false;
  if (Status s = WriteFileAtomic(path, content, mode); !s.ok()) return s;
  return true;
}

Status MakeDirs(const std::string& path, int mode) {
  std::filesystem::path partial;
  for (const auto& part : std::filesystem::path(path)) {
    partial /= part;
    if (part.empty() || mkdir(partial.c_str(), static_cast<mode_t>(mode)) == 0) continue;
    int err = errno;
    struct stat st;
    // EEXIST, or EACCES on a parent that exists but is not ours to write.
    if (stat(partial.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) continue;
    return Status::FromErrno(err, "create directory " + partial.string());
  }
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
