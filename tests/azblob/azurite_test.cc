// The azblob:// store against azurite (Microsoft's own Azure Storage emulator, blob service only,
// npm, pinned in tests/azblob/package.json) on 127.0.0.1 at a port it picks, with its well-known
// development account and Shared Key: azurite checks every signature, so the signer is held to the
// service's own rules here. Records, conditional creates racing, listings page by page, block
// uploads, ranged reads, backups, a rendezvous of several nodes, and the refusals an operator must
// act on. Exits 77 (meson's "skipped") without node or azurite.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <openssl/evp.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>

#include "../support/programs.h"
#include "../support/scoped_env.h"
#include "../support/spawned_server.h"
#include "../support/store_checks.h"
#include "quorate/http.h"
#include "store/vfs_azblob.h"

namespace quorate {
namespace {

// Azurite's development account, as its documentation publishes it.
constexpr const char* kAccount = "devstoreaccount1";
constexpr const char* kKey = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
std::string g_endpoint;

std::unique_ptr<Vfs> Open(const std::string& prefix, const std::string& extra = "") {
  auto vfs = OpenVfs(fmt::format("azblob://{}/quorate/{}?endpoint={}&timeout=10s{}", kAccount, prefix, g_endpoint,
                                 extra));
  REQUIRE_MESSAGE(vfs.ok(), vfs.status().message());
  return std::move(*vfs);
}

// Create Container, signed by the store's own signer: the store never creates its container.
int CreateContainer(const std::string& name) {
  std::time_t now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", std::gmtime(&now));
  HttpRequest request;
  request.base_url = g_endpoint;
  request.method = "PUT";
  request.target = fmt::format("/{}/{}?restype=container", kAccount, name);
  request.headers = {{"x-ms-version", kAzureBlobVersion}, {"x-ms-date", date}};
  std::string key(64, '\0');
  key.resize(EVP_DecodeBlock(reinterpret_cast<unsigned char*>(key.data()),
                             reinterpret_cast<const unsigned char*>(kKey), 88) - 2);
  request.headers.emplace_back(
      "Authorization",
      azblob::SharedKeyAuthorization(kAccount, key, azblob::StringToSign("PUT", request.target, request.headers, 0,
                                                                         kAccount)));
  request.timeout = std::chrono::seconds(20);
  request.max_body = 64 * 1024;
  HttpResult result = HttpSend(request);
  return result.ok() ? result.response.status : -1;
}

TEST_CASE("azurite: records, conditional create, read, replace, remove") { store_checks::Records(*Open("records")); }

TEST_CASE("azurite: listings read every page, below a folder-like prefix only") {
  store_checks::Listings([](const std::string& prefix) { return Open(prefix, "&page_size=2"); });
}

TEST_CASE("azurite: streams beyond one part are blocks and ranged reads") { store_checks::Streams(*Open("s")); }

TEST_CASE("azurite: a backup is saved, listed, verified and read back for a restore") {
  const std::string url = fmt::format("azblob://{}/quorate/b?endpoint={}", kAccount, g_endpoint);
  auto vfs = OpenVfs(url);
  REQUIRE(vfs.ok());
  store_checks::Backups(**vfs, url);
}

TEST_CASE("azurite: racing creates of one key, one winner; a rendezvous of five nodes for three seats") {
  store_checks::ExclusiveCreate([](const std::string& prefix) { return Open(prefix); }, 6);
  store_checks::RendezvousRace([](const std::string& prefix) { return Open(prefix, "&page_size=2"); }, 5, 3);
}

TEST_CASE("azurite: a missing container and a wrong key are the operator's to fix, and say what") {
  auto vfs = OpenVfs(fmt::format("azblob://{}/nosuchcontainer/x?endpoint={}", kAccount, g_endpoint));
  REQUIRE(vfs.ok());
  auto created = (*vfs)->CreateIfAbsent("k", "x");
  CHECK(created.status().IsInvalidArgument());
  CHECK_MESSAGE(store_checks::Mentions(created.status(), "container 'nosuchcontainer' does not exist"),
                created.status().message());
  auto list = (*vfs)->List("");
  CHECK(list.status().IsInvalidArgument());
  CHECK_MESSAGE(store_checks::Mentions(list.status(), "ContainerNotFound"), list.status().message());

  const std::string wrong_key = "AAAA" + std::string(kKey).substr(4);
  ScopedEnv key("AZURE_STORAGE_KEY", wrong_key.c_str());
  auto rejected = OpenVfs(fmt::format("azblob://{}/quorate/x?endpoint={}", kAccount, g_endpoint));
  REQUIRE(rejected.ok());
  Status write = (*rejected)->Write("k", "x");
  CHECK(write.IsInvalidArgument());
  CHECK_MESSAGE(store_checks::Mentions(write, "credentials rejected"), write.message());
  CHECK_MESSAGE(!store_checks::Mentions(write, wrong_key.substr(0, 12)), write.message());
}

}  // namespace
}  // namespace quorate

int main(int argc, char** argv) {
  if (quorate::FindProgram("node").empty()) {
    std::printf("SKIP: node is not on PATH; azurite needs Node.js (scripts/deps installs nodejs and npm)\n");
    return 77;
  }
  const char* dir = std::getenv("QUORATE_AZBLOB_DIR");
  const std::string base = std::string(dir ? dir : "tests/azblob");
  const std::string azurite = base + "/node_modules/.bin/azurite-blob";
  if (access(azurite.c_str(), X_OK) != 0) {
    std::printf("SKIP: %s is missing (scripts/deps runs npm ci --prefix tests/azblob)\n", azurite.c_str());
    return 77;
  }
  const std::filesystem::path work =
      std::filesystem::temp_directory_path() / fmt::format("quorate-azurite-{}", getpid());
  std::filesystem::create_directories(work);
  quorate::SpawnedServer server;
  // In memory (256 MB at most), no telemetry (it would try to reach outside), loopback only, a port
  // of its choosing.
  if (!server.Start({azurite, "--blobHost", "127.0.0.1", "--blobPort", "0", "--inMemoryPersistence",
                     "--extentMemoryLimit", "256", "--disableTelemetry"},
                    (work / "azurite.log").string(), "listens on (http://\\S+)")) {
    std::filesystem::remove_all(work);
    return 1;
  }
  quorate::g_endpoint = server.url();
  setenv("AZURE_STORAGE_KEY", quorate::kKey, 1);
  int status = quorate::CreateContainer("quorate");
  if (status != 201) {
    std::fprintf(stderr, "creating container 'quorate' in azurite: HTTP %d\n%s\n", status, server.Log().c_str());
    return 1;
  }
  doctest::Context context(argc, argv);
  int rc = context.run();
  server.Stop();
  std::filesystem::remove_all(work);
  return rc;
}
