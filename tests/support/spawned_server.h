// A server a test starts as a child process on 127.0.0.1 at a port it picks itself (port 0), found
// by the address it prints: the Cloud Storage emulator, azurite. Its output goes to a log file that
// is shown when it does not come up.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace quorate {

class SpawnedServer {
 public:
  SpawnedServer() = default;
  SpawnedServer(const SpawnedServer&) = delete;
  SpawnedServer& operator=(const SpawnedServer&) = delete;
  ~SpawnedServer() { Stop(); }

  // Starts `argv` with its output in `log_path` and waits (up to a minute: node loads slowly on a
  // busy machine) until the log matches `ready`, whose first group is the server's base URL.
  bool Start(const std::vector<std::string>& argv, const std::string& log_path, const std::string& ready) {
    log_path_ = log_path;
    std::vector<std::string> args = argv;
    std::vector<char*> raw;
    for (auto& a : args) raw.push_back(a.data());
    raw.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    int err = posix_spawnp(&pid_, raw[0], &actions, nullptr, raw.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (err != 0) {
      std::fprintf(stderr, "starting %s: %s\n", raw[0], std::strerror(err));
      pid_ = -1;
      return false;
    }
    const std::regex pattern(ready);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
    while (std::chrono::steady_clock::now() < deadline) {
      std::smatch m;
      const std::string log = Log();
      if (std::regex_search(log, m, pattern)) {
        url_ = m[1];
        return true;
      }
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::fprintf(stderr, "%s did not come up:\n%s\n", raw[0], Log().c_str());
    Stop();
    return false;
  }

  void Stop() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

  const std::string& url() const { return url_; }
  std::string Log() const {
    std::ifstream log(log_path_);
    return std::string(std::istreambuf_iterator<char>(log), {});
  }

 private:
  pid_t pid_ = -1;
  std::string log_path_;
  std::string url_;
};

}  // namespace quorate
