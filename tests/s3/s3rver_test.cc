// The S3 store and the `s3` provider against a real S3-compatible server: s3rver (npm, pinned in
// tests/s3/package.json) on 127.0.0.1 at a free high port, with a temp directory and one bucket.
// s3rver checks the access key id but not SigV4 signatures, so the signer is held to AWS's
// published examples in the unit tests instead. Exits 77 (meson's "skipped") without node or s3rver.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <fcntl.h>
#include <fmt/format.h>
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
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "../support/ports.h"
#include "../support/programs.h"
#include "../support/store_checks.h"
#include "quorate/fs.h"
#include "quorate/provider.h"
#include "store/s3.h"

extern char** environ;

namespace quorate {
namespace {

using namespace std::chrono_literals;
using Keys = std::vector<std::string>;

constexpr const char* kBucket = "quorate";

// The copy scripts/deps installs beside package.json first, then one on PATH.
std::string FindS3rver() {
  if (const char* dir = std::getenv("QUORATE_S3RVER_DIR")) {
    std::string local = std::string(dir) + "/node_modules/.bin/s3rver";
    if (access(local.c_str(), X_OK) == 0) return local;
  }
  return FindProgram("s3rver");
}

class S3rver {
 public:
  // Retries with another port when the one picked was taken in between.
  bool Start(const std::string& binary) {
    char dir[] = "/tmp/quorate-s3rver-XXXXXX";
    if (!mkdtemp(dir)) {
      std::perror("mkdtemp");
      return false;
    }
    dir_ = dir;
    for (int attempt = 0; attempt < 5; ++attempt) {
      port_ = FreePort();
      if (Spawn(binary)) return true;
    }
    return false;
  }

  void Stop() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }

  int port() const { return port_; }
  std::string endpoint() const { return fmt::format("http://127.0.0.1:{}", port_); }

 private:
  bool Spawn(const std::string& binary) {
    const std::string data = dir_ + "/data", log_path = dir_ + "/s3rver.log";
    std::filesystem::create_directories(data);
    std::vector<std::string> args = {
        binary, "--directory", data, "--address", "127.0.0.1", "--port", std::to_string(port_), "--configure-bucket",
        kBucket};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    // s3rver's continuation tokens are DES-encrypted, which OpenSSL 3 only has in its legacy
    // provider: without it the second page of every listing is a 500.
    std::vector<std::string> env = {"NODE_OPTIONS=--openssl-legacy-provider"};
    for (char** e = environ; *e; ++e) {
      if (std::strncmp(*e, "NODE_OPTIONS=", 13) != 0) env.emplace_back(*e);
    }
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    int err = posix_spawn(&pid_, binary.c_str(), &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (err != 0) {
      std::fprintf(stderr, "starting %s: %s\n", binary.c_str(), std::strerror(err));
      std::exit(1);
    }
    // node takes a second or two to load s3rver on a busy machine.
    auto deadline = std::chrono::steady_clock::now() + 30s;
    while (std::chrono::steady_clock::now() < deadline) {
      if (TcpAnswers(port_)) return true;
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) break;
      std::this_thread::sleep_for(50ms);
    }
    std::ifstream log(log_path);
    std::fprintf(stderr, "s3rver on 127.0.0.1:%d did not come up:\n%s\n", port_,
                 std::string(std::istreambuf_iterator<char>(log), {}).c_str());
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
    return false;
  }

  std::string dir_;
  pid_t pid_ = -1;
  int port_ = 0;
};

S3rver* g_s3 = nullptr;

bool Mentions(const Status& s, const std::string& text) { return s.message().find(text) != std::string::npos; }

std::unique_ptr<Vfs> Open(const std::string& prefix, const std::string& extra = "") {
  auto vfs = OpenS3Vfs(fmt::format("s3://{}/{}?endpoint={}&timeout=5s{}", kBucket, prefix, g_s3->endpoint(), extra));
  REQUIRE_MESSAGE(vfs.ok(), vfs.status().message());
  return std::move(*vfs);
}

TEST_CASE("s3rver: create if absent, read, replace") {
  auto vfs = Open("basic");
  CHECK_FALSE(vfs->exclusive_create());
  auto created = vfs->CreateIfAbsent("tok/members/n1", "one");
  REQUIRE_MESSAGE(created.ok(), created.status().message());
  CHECK(*created);
  auto again = vfs->CreateIfAbsent("tok/members/n1", "two");
  REQUIRE(again.ok());
  CHECK_FALSE(*again);
  CHECK(*vfs->Read("tok/members/n1", kMaxLocalFileBytes) == "one");

  REQUIRE(vfs->Write("tok/members/n1", "three").ok());
  CHECK(*vfs->Read("tok/members/n1", kMaxLocalFileBytes) == "three");
  // Bytes a text-minded layer would mangle come back as they went.
  const std::string binary("{\"a\":\"\x01\xff\"}\0tail", 14);
  REQUIRE(vfs->Write("tok/raw", binary).ok());
  CHECK(*vfs->Read("tok/raw", kMaxLocalFileBytes) == binary);
}

TEST_CASE("s3rver: a missing key is NotFound, naming it") {
  auto vfs = Open("basic");
  auto missing = vfs->Read("tok/members/nobody", kMaxLocalFileBytes);
  CHECK(missing.status().IsNotFound());
  CHECK_MESSAGE(Mentions(missing.status(), "s3://quorate/basic/tok/members/nobody"), missing.status().message());
}

TEST_CASE("s3rver: listings read every page, below a folder-like prefix only") {
  store_checks::Listings([](const std::string& prefix) { return Open(prefix, "&page_size=2"); });
  CHECK(Open("pages")->List("../x").status().IsInvalidArgument());
}

TEST_CASE("s3rver: a bucket that does not exist is a clear error, naming it") {
  auto vfs = OpenS3Vfs(fmt::format("s3://nosuchbucket/x?endpoint={}", g_s3->endpoint()));
  REQUIRE(vfs.ok());
  auto read = (*vfs)->Read("k", kMaxLocalFileBytes);
  CHECK(read.status().IsInvalidArgument());
  CHECK_MESSAGE(Mentions(read.status(), "bucket 'nosuchbucket' does not exist"), read.status().message());
  CHECK(Mentions(read.status(), "NoSuchBucket"));
  auto create = (*vfs)->CreateIfAbsent("k", "x");
  CHECK(create.status().IsInvalidArgument());
  CHECK_MESSAGE(Mentions(create.status(), "nosuchbucket"), create.status().message());
  auto list = (*vfs)->List("");
  CHECK(list.status().IsInvalidArgument());
  CHECK_MESSAGE(Mentions(list.status(), "nosuchbucket"), list.status().message());
}

TEST_CASE("s3rver: an unknown access key is 'credentials rejected'") {
  setenv("AWS_ACCESS_KEY_ID", "NOT-S3RVER", 1);
  auto vfs = OpenS3Vfs(fmt::format("s3://{}/creds?endpoint={}", kBucket, g_s3->endpoint()));
  setenv("AWS_ACCESS_KEY_ID", "S3RVER", 1);
  REQUIRE(vfs.ok());
  Status write = (*vfs)->Write("k", "x");
  CHECK(write.IsInvalidArgument());
  CHECK_MESSAGE(Mentions(write, "credentials rejected"), write.message());
  CHECK(Mentions(write, "InvalidAccessKeyId"));
}

TEST_CASE("nothing listening: Unavailable after 3 quick tries") {
  int port = FreePort();
  auto vfs = OpenS3Vfs(fmt::format("s3://{}/x?endpoint=http://127.0.0.1:{}&timeout=2s", kBucket, port));
  REQUIRE(vfs.ok());
  auto start = std::chrono::steady_clock::now();
  auto read = (*vfs)->Read("k", kMaxLocalFileBytes);
  auto elapsed = std::chrono::steady_clock::now() - start;
  CHECK(read.status().IsUnavailable());
  CHECK_MESSAGE(Mentions(read.status(), "failed 3 times"), read.status().message());
  CHECK(Mentions(read.status(), fmt::format("127.0.0.1:{}", port)));
  CHECK(elapsed < 2s);
}

TEST_CASE("a server that never answers: Unavailable within the timeout") {
  SilentListener silent;
  auto vfs = OpenS3Vfs(fmt::format("s3://{}/x?endpoint={}&timeout=700ms", kBucket, silent.url()));
  REQUIRE(vfs.ok());
  auto start = std::chrono::steady_clock::now();
  Status write = (*vfs)->Write("k", "x");
  auto elapsed = std::chrono::steady_clock::now() - start;
  CHECK(write.IsUnavailable());
  // The message gives the time it took (704 ms, say), so the check is on the budget it names.
  CHECK_MESSAGE(Mentions(write, "silent for 700 ms"), write.message());
  CHECK(elapsed >= 600ms);
  CHECK(elapsed < 1500ms);
  MESSAGE("gave up after " << std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count() << " ms");
}

// Three nodes started at once, each its own provider as `quorate discover` builds it, agree on one
// sealed set through the store. s3rver has no conditional PUT, so this is the non-exclusive path:
// the set is sealed only from exactly 3 registrations.
TEST_CASE("s3rver: the s3 provider agrees 3 members") {
  const std::vector<std::string> names = {"n1", "n2", "n3"};
  std::vector<Result<std::vector<Member>>> results(names.size(), Status::Unavailable("not run"));
  std::vector<std::thread> nodes;
  for (size_t i = 0; i < names.size(); ++i) {
    nodes.emplace_back([&, i] {
      ProviderContext context;
      context.self = {
          names[i], {fmt::format("http://127.0.0.{}:2380", i + 1)}, {fmt::format("http://127.0.0.{}:2379", i + 1)}};
      context.token = "s3-agree";
      context.cluster_size = 3;
      auto spec = ParseDiscoverySpec(fmt::format(
          "provider=s3 bucket={} prefix=agree endpoint={} region=us-east-1 page_size=2", kBucket, g_s3->endpoint()));
      if (!spec.ok()) {
        results[i] = spec.status();
        return;
      }
      auto provider = ProviderRegistry::Get().Create(*spec, context);
      if (!provider.ok()) {
        results[i] = provider.status();
        return;
      }
      auto deadline = std::chrono::steady_clock::now() + 30s;
      do {
        results[i] = (*provider)->Discover();
        if (results[i].ok() && results[i]->size() == names.size()) return;
        std::this_thread::sleep_for(100ms);
      } while (std::chrono::steady_clock::now() < deadline);
    });
  }
  for (auto& t : nodes) t.join();
  for (size_t i = 0; i < names.size(); ++i) {
    REQUIRE_MESSAGE(results[i].ok(), names[i] << ": " << results[i].status().message());
    REQUIRE_MESSAGE(results[i]->size() == 3, names[i] << " saw " << results[i]->size() << " members");
    CHECK(*results[i] == *results[0]);
  }
  std::set<std::string> sealed;
  for (const auto& m : *results[0]) sealed.insert(m.name);
  CHECK(sealed == std::set<std::string>{"n1", "n2", "n3"});
  auto listed = Open("agree")->List("s3-agree");
  REQUIRE(listed.ok());
  CHECK(*listed == Keys{"s3-agree/members/n1", "s3-agree/members/n2", "s3-agree/members/n3", "s3-agree/sealed"});
}

}  // namespace
}  // namespace quorate

int main(int argc, char** argv) {
  if (quorate::FindProgram("node").empty()) {
    std::printf("SKIP: node is not on PATH; s3rver needs Node.js (scripts/deps installs nodejs and npm)\n");
    return 77;
  }
  std::string binary = quorate::FindS3rver();
  if (binary.empty()) {
    std::printf(
        "SKIP: s3rver not found in tests/s3/node_modules or on PATH (scripts/deps runs "
        "npm install --prefix tests/s3)\n");
    return 77;
  }
  // s3rver's one account; it checks the key id, not the signature.
  setenv("AWS_ACCESS_KEY_ID", "S3RVER", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "S3RVER", 1);
  unsetenv("AWS_SESSION_TOKEN");
  quorate::S3rver s3;
  if (!s3.Start(binary)) {
    s3.Stop();
    return 1;
  }
  quorate::g_s3 = &s3;
  doctest::Context context(argc, argv);
  int rc = context.run();
  s3.Stop();
  return rc;
}
