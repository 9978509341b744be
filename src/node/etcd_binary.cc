#include "node/etcd_binary.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <future>
#include <mutex>
#include <optional>

#include <fmt/format.h>

#include "core/bucket.h"
#include "etcd/etcd_version.h"
#include "etcd/peer_probe.h"
#include "node/process.h"
#include "quorate/log.h"
#include "quorate/text.h"

namespace quorate {

namespace {

// Its output goes into a pipe, so a binary that floods it blocks once the pipe is full instead of
// filling memory, and only the start of it is read.
Result<EtcdVersion> AskBinaryVersion(const std::string& etcd_path) {
  constexpr auto kDeadline = std::chrono::seconds(5);
  constexpr size_t kMaxOutputBytes = 4096;
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) return Status::FromErrno(errno, "pipe for etcd --version");
  // The launcher appends the child's stdout and stderr to a path; this one opens the pipe's write end.
  close(pipe_fds[1]);
  const int read_fd = pipe_fds[0];
  {
    auto child = RealProcessLauncher().Start({{etcd_path, "--version"}, {}, fmt::format("/proc/self/fd/{}", read_fd)});
    if (!child.ok()) {
      close(read_fd);
      return Status::NotFound(fmt::format("{} --version: {}", Printable(etcd_path), child.status().message()));
    }
    auto exit = (*child)->Wait(kDeadline);
    if (exit.ok() && !*exit) {
      spdlog::warn("{} --version did not answer within {} s", Printable(etcd_path), kDeadline.count());
    }
  }  // a child still running is killed and reaped here
  std::string output(kMaxOutputBytes, '\0');
  ssize_t n = read(read_fd, output.data(), output.size());
  close(read_fd);
  output.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return ParseEtcdVersionOutput(output, Printable(etcd_path));
}

// The file a version was read from: a binary replaced in place (a package upgrade, a new image's
// file under the same path) differs in one of these, so it is asked again.
struct BinaryFile {
  std::string path;
  dev_t device = 0;
  ino_t inode = 0;
  off_t size = 0;
  timespec modified{};
  bool operator==(const BinaryFile& o) const {
    return path == o.path && device == o.device && inode == o.inode && size == o.size &&
           modified.tv_sec == o.modified.tv_sec && modified.tv_nsec == o.modified.tv_nsec;
  }
};

std::optional<BinaryFile> FileOf(const std::string& etcd_path) {
  auto found = FindProgram(etcd_path);
  struct stat st;
  if (!found.ok() || ::stat(found->c_str(), &st) != 0) return std::nullopt;
  return BinaryFile{*found, st.st_dev, st.st_ino, st.st_size, st.st_mtim};
}

}  // namespace

// quorate run asks before every start of etcd; each ask forks and execs a Go binary, which took
// seconds on a loaded machine, for an answer that changes only with the file. quorate run also asks
// ahead, beside a restore, so that init's ask after it joins that one (or finds its answer) instead
// of running the binary again on etcd's critical path.
Result<EtcdVersion> EtcdBinaryVersion(const std::string& etcd_path) {
  static std::mutex mu;
  static std::optional<std::pair<BinaryFile, EtcdVersion>> known;
  // The ask under way, for the file it runs: one ask per file at a time.
  static std::optional<std::pair<BinaryFile, std::shared_future<Result<EtcdVersion>>>> asking;
  auto file = FileOf(etcd_path);
  std::promise<Result<EtcdVersion>> answer;
  if (file) {
    std::unique_lock lock(mu);
    if (known && known->first == *file) return known->second;
    if (asking && asking->first == *file) {
      std::shared_future<Result<EtcdVersion>> under_way = asking->second;
      lock.unlock();
      return under_way.get();
    }
    asking = {{*file, answer.get_future().share()}};
  }
  auto version = AskBinaryVersion(etcd_path);
  if (file) {
    std::lock_guard lock(mu);
    // Kept only when the file did not change while it was asked.
    if (version.ok() && FileOf(etcd_path) == file) known = {{*file, *version}};
    if (asking && asking->first == *file) asking.reset();
    answer.set_value(version);
  }
  return version;
}

std::vector<std::optional<VersionAnswer>> AskVersions(const std::vector<Member>& members, const TlsFiles& peer_tls,
                                                      std::chrono::milliseconds timeout) {
  std::vector<std::future<std::optional<VersionAnswer>>> asks;
  for (const auto& m : members) {
    asks.push_back(std::async(std::launch::async, [&m, &peer_tls, timeout]() -> std::optional<VersionAnswer> {
      for (const auto& url : m.peer_urls) {
        auto answer = ProbeVersion(url, peer_tls, timeout);
        if (answer.ok()) return *answer;
      }
      return std::nullopt;
    }));
  }
  std::vector<std::optional<VersionAnswer>> out;
  for (auto& a : asks) out.push_back(a.get());
  return out;
}

ClusterVersionSeen SeeClusterVersion(const Config& config) {
  auto bucket = LoadBucket(config.state_dir);
  if (!bucket.ok()) return {std::nullopt, bucket.status().message()};
  ClusterVersionSeen seen{bucket->cluster.cluster_version, "recorded in the member bucket"};
  const auto& members = bucket->members.members();
  auto answers = AskVersions(members, config.peer_tls, std::chrono::seconds(1));
  for (size_t i = 0; i < members.size(); ++i) {
    const auto& cluster = answers[i] ? answers[i]->cluster : std::nullopt;
    if (cluster && (!seen.version || *cluster > *seen.version || seen.source.starts_with("recorded"))) {
      seen = {cluster, "said by " + members[i].name};
    }
  }
  if (!seen.version) seen.source = "no member answered and none is recorded in the member bucket";
  return seen;
}

}  // namespace quorate
