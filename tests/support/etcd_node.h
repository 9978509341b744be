// A real etcd member for the tests of tests/etcd/: one process in a temp data dir, started with the
// flags given, killed and its directory removed on destruction, and killed by the kernel should the
// test process die first. Its output goes to a log the test prints when etcd misbehaves.
#pragma once

#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace quorate {

class EtcdNode {
 public:
  // `initial_cluster` is etcd's --initial-cluster ("n1=http://...,n2=..."), which names this
  // member's peers before they exist; state is always "new".
  EtcdNode(const std::string& name, const std::string& peer_url, const std::string& client_url,
           const std::string& initial_cluster, const std::string& token) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "quorate-etcd-node-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    dir_ = tmpl;
    std::vector<std::string> args = {"etcd",
                                     "--name=" + name,
                                     "--data-dir=" + dir_ + "/data",
                                     "--listen-peer-urls=" + peer_url,
                                     "--initial-advertise-peer-urls=" + peer_url,
                                     "--listen-client-urls=" + client_url,
                                     "--advertise-client-urls=" + client_url,
                                     "--initial-cluster=" + initial_cluster,
                                     "--initial-cluster-token=" + token,
                                     "--initial-cluster-state=new"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::string log = dir_ + "/etcd.log";
    pid_t parent = getpid();
    pid_ = fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      // Only fd-level calls here: stdio would flush the parent's buffered output a second time.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
      }
      execvp("etcd", argv.data());
      _exit(127);
    }
  }
  ~EtcdNode() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    std::filesystem::remove_all(dir_);
  }
  EtcdNode(const EtcdNode&) = delete;
  EtcdNode& operator=(const EtcdNode&) = delete;

  bool Exited() {
    if (pid_ > 0 && waitpid(pid_, nullptr, WNOHANG) == pid_) pid_ = 0;
    return pid_ == 0;
  }
  std::string Log() const {
    std::ifstream in(dir_ + "/etcd.log");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  std::string dir_;
  pid_t pid_ = 0;
};

}  // namespace quorate
