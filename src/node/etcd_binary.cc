#include "node/etcd_binary.h"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include "etcd/etcd_version.h"
#include "node/process.h"
#include "quorate/log.h"
#include "quorate/text.h"

namespace quorate {

// Its output goes into a pipe, so a binary that floods it blocks once the pipe is full instead of
// filling memory, and only the start of it is read.
Result<EtcdVersion> EtcdBinaryVersion(const std::string& etcd_path) {
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

}  // namespace quorate
