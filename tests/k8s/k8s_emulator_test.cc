// The `k8s` provider against the Kubernetes API-server emulator (apiserver_emulator.py, beside this
// file) over real HTTPS on 127.0.0.1 with a CA made for the run: pods and EndpointSlices in the real
// JSON shapes, pagination, every refusal the provider explains, token rotation, and `quorate
// discover` end to end. The emulator is not a real API server: it speaks the documented wire format
// for these few resources. Exits 77 (meson's "skipped") without python3 or openssl.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../support/test_certs.h"
#include "quorate/member.h"
#include "quorate/provider.h"

extern char** environ;

namespace quorate {
namespace {

using nlohmann::json;

bool Mentions(const Status& s, const std::string& text) { return s.message().find(text) != std::string::npos; }

void WriteText(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::trunc) << text; }

// One emulator for the whole run, started by the first test that needs it and reset by each.
class Emulator {
 public:
  Emulator() {
    if (!certs_.ok()) return;
    emulator_token_ = certs_.Path("emulator-token");
    client_token_ = certs_.Path("client-token");
    WriteText(emulator_token_, "token-1\n");
    WriteText(client_token_, "token-1\n");
    Start();
  }
  ~Emulator() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }

  bool ok() const { return port_ > 0; }
  std::string api_server() const { return fmt::format("https://127.0.0.1:{}", port_); }
  const TestCerts& certs() const { return certs_; }
  // The token the emulator accepts and the one the provider sends, each its own file so a test
  // can rotate one before the other.
  void SetEmulatorToken(const std::string& token) { WriteText(emulator_token_, token + "\n"); }
  void SetClientToken(const std::string& token) { WriteText(client_token_, token + "\n"); }

  std::string Spec(const std::string& keys) const {
    return fmt::format("provider=k8s service=etcd namespace=default api_server={} token_file={} ca_file={} {}",
                       api_server(), client_token_, certs_.Path("ca.crt"), keys);
  }

  void Reset() {
    Control("/_emulator/reset", json::object());
    SetEmulatorToken("token-1");
    SetClientToken("token-1");
  }
  void Configure(const json& config) { Control("/_emulator/config", config); }
  json Requests() {
    auto res = Client().Get("/_emulator/requests");
    REQUIRE(res);
    return json::parse(res->body);
  }

  // A call to the emulated API with the current token; the created or read object.
  json Api(const std::string& method, const std::string& path, const json& body = json()) {
    auto client = Client();
    std::ifstream in(emulator_token_);
    std::string token;
    in >> token;
    client.set_bearer_token_auth(token);
    httplib::Result res = method == "POST"  ? client.Post(path, body.dump(), "application/json")
                          : method == "PUT" ? client.Put(path, body.dump(), "application/json")
                          : method == "GET" ? client.Get(path)
                                            : client.Delete(path);
    REQUIRE_MESSAGE(res, path);
    REQUIRE_MESSAGE(res->status / 100 == 2, method, " ", path, ": ", res->status, " ", res->body);
    return json::parse(res->body);
  }

 private:
  httplib::Client Client() const {
    httplib::Client client(api_server());
    client.set_ca_cert_path(certs_.Path("ca.crt"));
    client.enable_server_certificate_verification(true);
    return client;
  }

  void Control(const std::string& path, const json& body) {
    auto res = Client().Post(path, body.dump(), "application/json");
    REQUIRE(res);
    REQUIRE_MESSAGE(res->status == 200, res->body);
  }

  void Start() {
    const char* script = std::getenv("QUORATE_K8S_EMULATOR");
    REQUIRE_MESSAGE(script, "QUORATE_K8S_EMULATOR names apiserver_emulator.py (tests/meson.build sets it)");
    std::vector<std::string> args = {"python3",      script,
                                     "--listen",     "127.0.0.1:0",
                                     "--cert",       certs_.Path("peer.crt"),
                                     "--key",        certs_.Path("peer.key"),
                                     "--token-file", emulator_token_,
                                     "--slice-size", "2"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int out[2];
    REQUIRE(pipe(out) == 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    int err = posix_spawnp(&pid_, "python3", &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    REQUIRE_MESSAGE(err == 0, "starting the emulator: ", std::strerror(err));
    // The one line it prints once it serves, with the port it got.
    std::string line;
    char c;
    while (read(out[0], &c, 1) == 1 && c != '\n') line += c;
    close(out[0]);
    const std::string prefix = "listening on 127.0.0.1:";
    REQUIRE_MESSAGE(line.rfind(prefix, 0) == 0, "the emulator said '", line, "'");
    port_ = std::stoi(line.substr(prefix.size()));
  }

  TestCerts certs_;
  std::string emulator_token_, client_token_;
  pid_t pid_ = -1;
  int port_ = 0;
};

Emulator& Shared() {
  static Emulator emulator;
  REQUIRE(emulator.ok());
  emulator.Reset();
  return emulator;
}

std::unique_ptr<DiscoveryProvider> Provider(Emulator& emu, const std::string& keys,
                                            std::optional<size_t> cluster_size = std::nullopt) {
  auto spec = ParseDiscoverySpec(emu.Spec(keys));
  REQUIRE_MESSAGE(spec.ok(), spec.status().message());
  ProviderContext context;
  context.cluster_size = cluster_size;
  auto provider = ProviderRegistry::Get().Create(*spec, context);
  REQUIRE_MESSAGE(provider.ok(), provider.status().message());
  return std::move(*provider);
}

std::vector<std::string> Names(const std::vector<Member>& members) {
  std::vector<std::string> names;
  for (const auto& m : members) names.push_back(m.name);
  return names;
}

// A StatefulSet's pod as the controller makes it: labels, owner, hostname/subdomain, named ports.
json StatefulSetPod(const std::string& name, bool with_ports = true) {
  json container = {{"name", "etcd"}, {"image", "quay.io/coreos/etcd:v3.4.23"}};
  if (with_ports) {
    container["ports"] = {{{"name", "peer"}, {"containerPort", 2380}, {"protocol", "TCP"}},
                          {{"name", "client"}, {"containerPort", 2379}, {"protocol", "TCP"}}};
  }
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", name},
            {"labels", {{"app", "etcd"}, {"statefulset.kubernetes.io/pod-name", name}}},
            {"ownerReferences",
             {{{"apiVersion", "apps/v1"},
               {"kind", "StatefulSet"},
               {"name", "etcd"},
               {"uid", "91ab"},
               {"controller", true},
               {"blockOwnerDeletion", true}}}}}},
          {"spec", {{"hostname", name}, {"subdomain", "etcd"}, {"containers", {container}}}}};
}

void MakeStatefulSet(Emulator& emu, int replicas, int pods, bool ready = true) {
  json sts = json::parse(R"({
    "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "etcd"},
    "spec": {"serviceName": "etcd", "podManagementPolicy": "Parallel",
             "selector": {"matchLabels": {"app": "etcd"}}}})");
  sts["spec"]["replicas"] = replicas;
  emu.Api("POST", "/apis/apps/v1/namespaces/default/statefulsets", sts);
  emu.Api("POST", "/api/v1/namespaces/default/services", json::parse(R"({
    "apiVersion": "v1", "kind": "Service", "metadata": {"name": "etcd"},
    "spec": {"clusterIP": "None", "publishNotReadyAddresses": true, "selector": {"app": "etcd"},
             "ports": [{"name": "peer", "port": 2380, "protocol": "TCP"},
                       {"name": "client", "port": 2379, "protocol": "TCP"}]}})"));
  for (int i = 0; i < pods; ++i) {
    const std::string name = fmt::format("etcd-{}", i);
    emu.Api("POST", "/api/v1/namespaces/default/pods", StatefulSetPod(name));
    json status = {{"phase", "Running"}, {"podIP", fmt::format("10.244.0.{}", 10 + i)}};
    status["conditions"] = json::array({{{"type", "Ready"}, {"status", ready ? "True" : "False"}}});
    emu.Api("PUT", "/api/v1/namespaces/default/pods/" + name + "/status", {{"status", status}});
  }
}

// The next GET under `path_prefix` answers `status` with `body`, as it is.
json FailOnce(const std::string& path_prefix, int status, const std::string& body, double delay_seconds = 0) {
  json failure = {{"method", "GET"}, {"path_prefix", path_prefix}, {"status", status}, {"body", body}};
  if (delay_seconds > 0) failure["delay"] = delay_seconds;
  return {{"fail", json::array({failure})}};
}

// The list requests the provider made, as (path, continue token) in order.
std::vector<std::pair<std::string, std::string>> Lists(Emulator& emu) {
  std::vector<std::pair<std::string, std::string>> lists;
  for (const json& r : emu.Requests()) {
    if (r["query"].contains("limit")) lists.emplace_back(r["path"], r["query"].value("continue", ""));
  }
  return lists;
}

}  // namespace

TEST_CASE("emulator: pods by label selector, page by page, deleting pods left out, replicas from the StatefulSet") {
  Emulator& emu = Shared();
  MakeStatefulSet(emu, 5, 5);
  emu.Api("DELETE", "/api/v1/namespaces/default/pods/etcd-3?gracePeriodSeconds=30");
  auto provider = Provider(emu, "label_selector=app=etcd page_size=2");
  CHECK_FALSE(provider->ImpliedSize());
  auto members = provider->Discover();
  REQUIRE_MESSAGE(members.ok(), members.status().message());
  CHECK(Names(*members) == std::vector<std::string>{"etcd-0", "etcd-1", "etcd-2", "etcd-4"});
  CHECK(members->front().peer_urls == std::vector<std::string>{"http://etcd-0.etcd.default.svc.cluster.local:2380"});
  CHECK(members->front().client_urls == std::vector<std::string>{"http://etcd-0.etcd.default.svc.cluster.local:2379"});
  CHECK(provider->ImpliedSize() == 5u);

  auto lists = Lists(emu);
  REQUIRE(lists.size() == 3);
  CHECK(lists[0].second.empty());
  CHECK_FALSE(lists[1].second.empty());
  CHECK_FALSE(lists[2].second.empty());
  for (const json& r : emu.Requests()) CHECK_MESSAGE(r["authorized"] == true, r.dump());

  emu.Api("PUT", "/apis/apps/v1/namespaces/default/statefulsets/etcd/scale", {{"spec", {{"replicas", 7}}}});
  REQUIRE(provider->Discover().ok());
  CHECK(provider->ImpliedSize() == 7u);
}

TEST_CASE(
    "emulator: EndpointSlices of the Service, not-ready counted, terminating not, over several slices and pages") {
  Emulator& emu = Shared();
  MakeStatefulSet(emu, 5, 5, /*ready=*/false);
  emu.Api("DELETE", "/api/v1/namespaces/default/pods/etcd-4?gracePeriodSeconds=30");
  emu.Configure({{"max_page", 1}});
  auto provider = Provider(emu, "port_name=peer cluster_domain=");
  auto members = provider->Discover();
  REQUIRE_MESSAGE(members.ok(), members.status().message());
  CHECK(Names(*members) == std::vector<std::string>{"etcd-0", "etcd-1", "etcd-2", "etcd-3"});
  CHECK(members->back().peer_urls == std::vector<std::string>{"http://etcd-3.etcd.default.svc:2380"});
  // Five endpoints at two a slice are three slices, one a page.
  auto lists = Lists(emu);
  CHECK(lists.size() == 3);
  for (const auto& [path, token] : lists) CHECK(path == "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices");
  // The controller comes from the first pod, the size from its StatefulSet.
  CHECK(provider->ImpliedSize() == 5u);
}

TEST_CASE("emulator: without named ports the conventional ones; with --cluster-size no StatefulSet is read") {
  Emulator& emu = Shared();
  emu.Api("POST", "/api/v1/namespaces/default/pods", StatefulSetPod("etcd-0", /*with_ports=*/false));
  auto provider = Provider(emu, "label_selector=app=etcd scheme=https", /*cluster_size=*/3);
  auto members = provider->Discover();
  REQUIRE_MESSAGE(members.ok(), members.status().message());
  CHECK(members->front().peer_urls == std::vector<std::string>{"https://etcd-0.etcd.default.svc.cluster.local:2380"});
  CHECK(members->front().client_urls == std::vector<std::string>{"https://etcd-0.etcd.default.svc.cluster.local:2379"});
  CHECK_FALSE(provider->ImpliedSize());
  for (const json& r : emu.Requests()) CHECK(r["path"] != "/apis/apps/v1/namespaces/default/statefulsets/etcd");
}

TEST_CASE("emulator: a rotated token is read again; a rejected one names the token file") {
  Emulator& emu = Shared();
  MakeStatefulSet(emu, 3, 3);
  auto provider = Provider(emu, "label_selector=app=etcd");
  REQUIRE(provider->Discover().ok());

  // kubelet rotates the projected token: the server takes only the new one from now on.
  emu.SetEmulatorToken("token-2");
  emu.SetClientToken("token-2");
  auto rotated = provider->Discover();
  CHECK_MESSAGE(rotated.ok(), rotated.status().message());

  emu.SetEmulatorToken("token-3");
  auto rejected = provider->Discover();
  CHECK(rejected.status().IsInvalidArgument());
  CHECK(Mentions(rejected.status(), "401"));
  CHECK(Mentions(rejected.status(), "client-token"));
  emu.SetClientToken("token-3");
  CHECK(provider->Discover().ok());

  size_t unauthorized = 0;
  for (const json& r : emu.Requests()) unauthorized += r["authorized"] == false;
  CHECK(unauthorized == 1);

  // Rotated while a request was on its way: the 401 sends the file's new token once more.
  emu.Configure(FailOnce(
      "/api/v1/namespaces/default/pods", 401,
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401})",
      /*delay_seconds=*/1));
  std::thread rotate([&emu] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    emu.SetEmulatorToken("token-4");
    emu.SetClientToken("token-4");
  });
  auto retried = provider->Discover();
  rotate.join();
  CHECK_MESSAGE(retried.ok(), retried.status().message());
  size_t refused_in_flight = 0;
  for (const json& r : emu.Requests()) refused_in_flight += r["status"] == 401 && r["authorized"] == true;
  CHECK(refused_in_flight == 1);
}

TEST_CASE("emulator: 403 names the verb and resource to grant") {
  Emulator& emu = Shared();
  MakeStatefulSet(emu, 3, 3);
  emu.Configure({{"deny", {"list pods"}}});
  auto listing = Provider(emu, "label_selector=app=etcd")->Discover();
  CHECK(listing.status().IsInvalidArgument());
  CHECK_MESSAGE(Mentions(listing.status(), R"(may not list pods in namespace default: add verb "list" on "pods")"),
                listing.status().message());
  CHECK(Mentions(listing.status(), R"(User "system:serviceaccount:default:etcd" cannot list resource "pods")"));

  emu.Configure({{"deny", {"get statefulsets"}}});
  auto sts = Provider(emu, "label_selector=app=etcd")->Discover();
  CHECK_MESSAGE(Mentions(sts.status(), R"(add verb "get" on "statefulsets" (API group "apps"))"),
                sts.status().message());

  emu.Configure({{"deny", {"list endpointslices"}}});
  auto slices = Provider(emu, "")->Discover();
  CHECK(Mentions(slices.status(), R"(add verb "list" on "endpointslices" (API group "discovery.k8s.io"))"));
}

TEST_CASE("emulator: 404 for a namespace or StatefulSet names the key to fix") {
  Emulator& emu = Shared();
  MakeStatefulSet(emu, 3, 3);
  auto spec = ParseDiscoverySpec(emu.Spec("label_selector=app=etcd"));
  REQUIRE(spec.ok());
  spec->params["namespace"] = "nowhere";
  auto provider = ProviderRegistry::Get().Create(*spec);
  REQUIRE(provider.ok());
  auto ns = (*provider)->Discover();
  CHECK(ns.status().IsInvalidArgument());
  CHECK_MESSAGE(Mentions(ns.status(), "namespace nowhere not found"), ns.status().message());

  auto sts = Provider(emu, "label_selector=app=etcd statefulset=etcd-old")->Discover();
  CHECK(sts.status().IsInvalidArgument());
  CHECK_MESSAGE(Mentions(sts.status(), "StatefulSet 'etcd-old' not found"), sts.status().message());
}

TEST_CASE("emulator: an expired continue token restarts the listing, a few times at most") {
  Emulator& emu = Shared();
  MakeStatefulSet(emu, 3, 3);
  emu.Configure({{"expire_continue", 1}});
  auto provider = Provider(emu, "label_selector=app=etcd page_size=2");
  auto members = provider->Discover();
  REQUIRE_MESSAGE(members.ok(), members.status().message());
  CHECK(members->size() == 3);
  auto lists = Lists(emu);
  REQUIRE(lists.size() == 4);
  CHECK(lists[2].second.empty());  // started again after the 410

  emu.Configure({{"expire_continue", true}});
  auto expiring = provider->Discover();
  CHECK(expiring.status().IsUnavailable());
  CHECK_MESSAGE(Mentions(expiring.status(), "410"), expiring.status().message());
}

TEST_CASE("emulator: 5xx, an unreachable server and garbage are retried later; garbage names the request") {
  Emulator& emu = Shared();
  MakeStatefulSet(emu, 3, 3);
  emu.Configure(FailOnce(
      "/api/v1/namespaces/default/pods", 500,
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"etcdserver: request timed out","reason":"InternalError","code":500})"));
  auto provider = Provider(emu, "label_selector=app=etcd");
  auto failed = provider->Discover();
  CHECK(failed.status().IsUnavailable());
  CHECK(Mentions(failed.status(), "etcdserver: request timed out"));
  CHECK(provider->Discover().ok());

  emu.Configure(FailOnce("/api/v1/namespaces/default/pods", 200, R"({"kind": "PodList", "items": [{)"));
  auto garbage = provider->Discover();
  CHECK(garbage.status().IsUnavailable());
  CHECK_MESSAGE(Mentions(garbage.status(), "/api/v1/namespaces/default/pods?labelSelector=app%3Detcd"),
                garbage.status().message());
  CHECK(Mentions(garbage.status(), "not JSON"));

  emu.Configure(FailOnce("/apis/apps/v1/namespaces/default/statefulsets/etcd", 200,
                         R"({"kind":"StatefulSet","spec":{"replicas":"three"}})"));
  auto shape = provider->Discover();
  CHECK(shape.status().IsUnavailable());
  CHECK(Mentions(shape.status(), "spec.replicas"));

  auto spec = ParseDiscoverySpec(emu.Spec("label_selector=app=etcd timeout=2s"));
  REQUIRE(spec.ok());
  spec->params["api_server"] = "https://127.0.0.1:1";
  auto down = ProviderRegistry::Get().Create(*spec);
  REQUIRE(down.ok());
  CHECK((*down)->Discover().status().IsUnavailable());
}

TEST_CASE("emulator: a server the CA bundle does not vouch for is refused, naming ca_file") {
  Emulator& emu = Shared();
  auto spec = ParseDiscoverySpec(emu.Spec("label_selector=app=etcd"));
  REQUIRE(spec.ok());
  spec->params["ca_file"] = emu.certs().Path("other-ca.crt");
  auto provider = ProviderRegistry::Get().Create(*spec);
  REQUIRE(provider.ok());
  auto untrusted = (*provider)->Discover();
  CHECK(untrusted.status().IsInvalidArgument());
  CHECK_MESSAGE(Mentions(untrusted.status(), "other-ca.crt"), untrusted.status().message());
  CHECK(emu.Requests().empty());
}

// `quorate discover` as an operator runs it: stdout, stderr and the exit code.
struct Run {
  int rc = -1;
  std::string out, err;
};

Run Quorate(const std::string& args) {
  const char* bin = std::getenv("QUORATE_BIN");
  REQUIRE_MESSAGE(bin, "QUORATE_BIN names the quorate binary (tests/meson.build sets it)");
  char err_path[] = "/tmp/quorate-k8s-stderr-XXXXXX";
  int fd = mkstemp(err_path);
  REQUIRE(fd >= 0);
  close(fd);
  Run run;
  FILE* p = popen(fmt::format("'{}' {} 2>'{}'", bin, args, err_path).c_str(), "r");
  REQUIRE(p);
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) run.out.append(buf, n);
  run.rc = WEXITSTATUS(pclose(p));
  std::ifstream in(err_path);
  run.err.assign(std::istreambuf_iterator<char>(in), {});
  std::remove(err_path);
  return run;
}

TEST_CASE(
    "emulator: quorate discover prints the pods with the IDs etcd will give them; a wrong answer exits 1, a missing "
    "RBAC grant 2, writing nothing") {
  Emulator& emu = Shared();
  MakeStatefulSet(emu, 3, 3);
  Run ok = Quorate(fmt::format("discover -w json --initial-cluster-token k8s-test --discovery '{}'",
                               emu.Spec("label_selector=app=etcd")));
  REQUIRE_MESSAGE(ok.rc == 0, ok.err);
  json doc = json::parse(ok.out);
  REQUIRE(doc["members"].size() == 3);
  std::vector<MemberId> ids;
  for (size_t i = 0; i < 3; ++i) {
    const json& m = doc["members"][i];
    const std::string url = fmt::format("http://etcd-{}.etcd.default.svc.cluster.local:2380", i);
    CHECK(m["name"] == fmt::format("etcd-{}", i));
    CHECK(m["peerURLs"] == json::array({url}));
    ids.push_back(ComputeMemberId({url}, "k8s-test"));
    CHECK(m["id"] == IdToHex(ids.back()));
  }
  CHECK(doc["clusterID"] == IdToHex(ComputeClusterId(ids)));

  emu.Configure(FailOnce("/api/v1/", 200, "]"));
  Run bad = Quorate(fmt::format("discover -w json --discovery '{}'", emu.Spec("label_selector=app=etcd")));
  CHECK(bad.rc == 1);
  CHECK(bad.out.empty());
  CHECK_MESSAGE(std::count(bad.err.begin(), bad.err.end(), '\n') == 1, bad.err);
  CHECK_MESSAGE(bad.err.find("not JSON") != std::string::npos, bad.err);

  emu.Configure({{"deny", {"list pods"}}});
  const std::string data_dir = emu.certs().Path("etcd-0-data");
  Run init = Quorate(fmt::format("init --name etcd-0 --data-dir '{}' --agent-listen 127.0.0.1:0 --discovery '{}'",
                                 data_dir, emu.Spec("label_selector=app=etcd")));
  CHECK(init.rc == 2);
  CHECK_MESSAGE(std::count(init.err.begin(), init.err.end(), '\n') == 1, init.err);
  CHECK_MESSAGE(init.err.find(R"(add verb "list" on "pods")") != std::string::npos, init.err);
  CHECK_FALSE(std::filesystem::exists(data_dir));
}

}  // namespace quorate

int main(int argc, char** argv) {
  for (const char* tool : {"python3", "openssl"}) {
    if (std::system(fmt::format("command -v {} >/dev/null 2>&1", tool).c_str()) != 0) {
      std::printf("SKIP: %s is not on PATH; the API-server emulator tests need it\n", tool);
      return 77;
    }
  }
  // As in quorate's main: a TLS peer that hangs up first must fail a call, not kill the process.
  std::signal(SIGPIPE, SIG_IGN);
  doctest::Context context(argc, argv);
  return context.run();
}
