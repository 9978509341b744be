// The gs:// store against tests/gcs/emulator.py (the JSON API as documented, proven by Google's
// own client in clients_test.js) on 127.0.0.1 at a port it picks: records, conditional creates
// racing, listings page by page, resumable uploads, ranged reads, backups, a rendezvous, the
// refusals an operator must act on, and a token from Google's chain (the emulator's metadata
// server). Exits 77 (meson's "skipped") without python3.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "../support/programs.h"
#include "../support/scoped_env.h"
#include "../support/spawned_server.h"
#include "../support/store_checks.h"
#include "store/vfs_gcs.h"

namespace quorate {
namespace {

constexpr const char* kToken = "ya29.test-token";
std::string g_endpoint;

std::unique_ptr<Vfs> Open(const std::string& prefix, const std::string& extra = "") {
  auto vfs = OpenVfs(fmt::format("gs://quorate/{}?endpoint={}&timeout=10s{}", prefix, g_endpoint, extra));
  REQUIRE_MESSAGE(vfs.ok(), vfs.status().message());
  return std::move(*vfs);
}

TEST_CASE("gcs: records, conditional create, read, replace, remove") { store_checks::Records(*Open("records")); }

TEST_CASE("gcs: listings read every page, below a folder-like prefix only") {
  store_checks::Listings([](const std::string& prefix) { return Open(prefix, "&page_size=2"); });
}

TEST_CASE("gcs: streams beyond one part are resumable uploads and ranged reads") { store_checks::Streams(*Open("s")); }

TEST_CASE("gcs: a backup is saved, listed, verified and read back for a restore") {
  const std::string url = fmt::format("gs://quorate/b?endpoint={}", g_endpoint);
  auto vfs = OpenVfs(url);
  REQUIRE(vfs.ok());
  store_checks::Backups(**vfs, url);
}

TEST_CASE("gcs: racing creates of one key, one winner; a rendezvous of five nodes for three seats") {
  store_checks::ExclusiveCreate([](const std::string& prefix) { return Open(prefix); }, 6);
  store_checks::RendezvousRace([](const std::string& prefix) { return Open(prefix, "&page_size=2"); }, 5, 3);
}

TEST_CASE("gcs: a missing bucket and a rejected token are the operator's to fix, and say what") {
  auto vfs = OpenVfs(fmt::format("gs://nosuchbucket/x?endpoint={}", g_endpoint));
  REQUIRE(vfs.ok());
  auto read = (*vfs)->Read("k", 100);
  CHECK(read.status().IsInvalidArgument());
  CHECK_MESSAGE(store_checks::Mentions(read.status(), "bucket 'nosuchbucket' does not exist"), read.status().message());
  auto list = (*vfs)->List("");
  CHECK(list.status().IsInvalidArgument());
  CHECK_MESSAGE(store_checks::Mentions(list.status(), "bucket 'nosuchbucket' does not exist"), list.status().message());

  BearerTokenSource wrong{[](Clock::TimePoint) -> Result<std::string> { return std::string("ya29.wrong-token"); }, {}};
  auto rejected = OpenGcsVfs(fmt::format("gs://quorate/x?endpoint={}", g_endpoint), Clock::kNever, wrong);
  REQUIRE(rejected.ok());
  Status write = (*rejected)->Write("k", "x");
  CHECK(write.IsInvalidArgument());
  CHECK_MESSAGE(store_checks::Mentions(write, "token was rejected"), write.message());
  CHECK_MESSAGE(!store_checks::Mentions(write, "wrong-token"), write.message());
}

TEST_CASE("gcs: without a token given, the store asks Google's chain: here the metadata server") {
  const std::string host = g_endpoint.substr(std::string("http://").size());
  ScopedEnv no_token("GOOGLE_OAUTH_ACCESS_TOKEN", ""), no_file("GOOGLE_APPLICATION_CREDENTIALS", ""),
      metadata("GCE_METADATA_HOST", host.c_str());
  auto vfs = Open("chain");
  REQUIRE(vfs->Write("k", "from the metadata server's token").ok());
  CHECK(*vfs->Read("k", 100) == "from the metadata server's token");
}

}  // namespace
}  // namespace quorate

int main(int argc, char** argv) {
  const std::string python = quorate::FindProgram("python3");
  if (python.empty()) {
    std::printf("SKIP: python3 is not on PATH; the Cloud Storage emulator needs it\n");
    return 77;
  }
  const char* dir = std::getenv("QUORATE_GCS_DIR");
  const std::string emulator = std::string(dir ? dir : "tests/gcs") + "/emulator.py";
  const std::string log = (std::filesystem::temp_directory_path() / fmt::format("quorate-gcs-{}.log", getpid())).string();
  quorate::SpawnedServer server;
  if (!server.Start({python, emulator, "--listen", "127.0.0.1:0", "--bucket", "quorate", "--token", quorate::kToken},
                    log, "listening on (\\S+)")) {
    return 1;
  }
  quorate::g_endpoint = "http://" + server.url();
  setenv("GOOGLE_OAUTH_ACCESS_TOKEN", quorate::kToken, 1);
  doctest::Context context(argc, argv);
  int rc = context.run();
  server.Stop();
  std::filesystem::remove(log);
  return rc;
}
