// The k8s provider's keys, paths and answer parsing, on JSON in the shapes the Kubernetes API
// documents (Pod and EndpointSlice as `kubectl get -o json` prints them). The provider against an
// API-server emulator over HTTPS is tests/k8s/k8s_emulator_test.cc.
#include "../../discovery/k8s/k8s.h"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "quorate/fs.h"
#include "quorate/provider.h"
#include "../support/scoped_env.h"

namespace quorate::k8s {
namespace {

bool Mentions(const Status& s, const std::string& text) { return s.message().find(text) != std::string::npos; }

// A token and a CA file in a temp dir, for keys that point at them.
class Credentials {
 public:
  Credentials() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "quorate-k8s-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    dir_ = tmpl;
    std::ofstream(dir_ + "/token") << "tok\n";
    std::ofstream(dir_ + "/ca.crt") << "-----BEGIN CERTIFICATE-----\n";
  }
  ~Credentials() { std::filesystem::remove_all(dir_); }
  std::string Keys() const { return fmt::format("token_file={0}/token ca_file={0}/ca.crt", dir_); }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

 private:
  std::string dir_;
};

Result<Options> Take(const std::string& text) {
  auto spec = ParseDiscoverySpec(text);
  REQUIRE_MESSAGE(spec.ok(), spec.status().message());
  ProviderParams params(*spec);
  return TakeOptions(params);
}

Options Defaults() {
  Options o;
  o.api_server = "https://10.96.0.1:443";
  o.namespace_name = "db";
  o.service = "etcd";
  return o;
}

const char* kPodList = R"({
  "kind": "PodList", "apiVersion": "v1",
  "metadata": {"resourceVersion": "7781", "continue": "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ", "remainingItemCount": 1},
  "items": [
    {"metadata": {"name": "etcd-0", "namespace": "db", "uid": "5b2c", "resourceVersion": "7700",
                  "labels": {"app": "etcd", "statefulset.kubernetes.io/pod-name": "etcd-0"},
                  "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "etcd", "uid": "91ab",
                                       "controller": true, "blockOwnerDeletion": true}]},
     "spec": {"hostname": "etcd-0", "subdomain": "etcd",
              "containers": [{"name": "etcd", "image": "quay.io/coreos/etcd:v3.4.23",
                              "ports": [{"name": "client", "containerPort": 12379, "protocol": "TCP"},
                                        {"name": "peer", "containerPort": 12380, "protocol": "TCP"}]}]},
     "status": {"phase": "Running", "podIP": "10.244.1.7",
                "conditions": [{"type": "Ready", "status": "True"}]}},
    {"metadata": {"name": "etcd-1", "namespace": "db", "deletionTimestamp": "2024-05-01T10:00:00Z",
                  "deletionGracePeriodSeconds": 30,
                  "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "etcd", "uid": "91ab",
                                       "controller": true}]},
     "spec": {"containers": [{"name": "etcd"}]}, "status": {"phase": "Running"}},
    {"metadata": {"name": "etcd-2", "namespace": "db"},
     "spec": {"containers": [{"name": "etcd", "ports": [{"containerPort": 9999}]}]},
     "status": {"phase": "Pending"}}
  ]})";

const char* kSliceList = R"({
  "kind": "EndpointSliceList", "apiVersion": "discovery.k8s.io/v1", "metadata": {"resourceVersion": "812"},
  "items": [{
    "metadata": {"name": "etcd-x7k2p", "namespace": "db", "generateName": "etcd-",
                 "labels": {"kubernetes.io/service-name": "etcd",
                            "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}},
    "addressType": "IPv4",
    "endpoints": [
      {"addresses": ["10.244.1.7"], "conditions": {"ready": true, "serving": true, "terminating": false},
       "hostname": "etcd-0", "nodeName": "node-a", "targetRef": {"kind": "Pod", "namespace": "db", "name": "etcd-0"}},
      {"addresses": ["10.244.2.3"], "conditions": {"ready": false, "serving": false, "terminating": false},
       "hostname": "etcd-1", "targetRef": {"kind": "Pod", "namespace": "db", "name": "etcd-1"}},
      {"addresses": ["10.244.3.9"], "conditions": {"ready": false, "serving": true, "terminating": true},
       "hostname": "etcd-2", "targetRef": {"kind": "Pod", "namespace": "db", "name": "etcd-2"}}
    ],
    "ports": [{"name": "peer", "port": 2390, "protocol": "TCP"}, {"name": "metrics", "port": 2381}]
  }]})";

}  // namespace

TEST_CASE("k8s keys: defaults, overrides and every bad value named") {
  Credentials creds;
  auto o = Take("provider=k8s service=etcd namespace=db api_server=https://10.0.0.1 " + creds.Keys());
  REQUIRE_MESSAGE(o.ok(), o.status().message());
  CHECK(o->api_server == "https://10.0.0.1:443");
  CHECK(o->port_name == "peer");
  CHECK(o->client_port_name == "client");
  CHECK(o->scheme == "http");
  CHECK(o->cluster_domain == "cluster.local");
  CHECK(o->page_size == 500);
  CHECK(o->label_selector.empty());
  CHECK(o->token_file == creds.Path("token"));

  auto all = Take(
      "provider=k8s service=etcd namespace=db api_server=https://[fd00::1]:6443/ label_selector=app=etcd "
      "port_name=etcd-peer client_port_name=etcd-client scheme=https cluster_domain=corp.example. "
      "statefulset=etcd page_size=2 timeout=3s " +
      creds.Keys());
  REQUIRE_MESSAGE(all.ok(), all.status().message());
  CHECK(all->api_server == "https://[fd00::1]:6443");
  CHECK(all->cluster_domain == "corp.example");
  CHECK(all->timeout == std::chrono::seconds(3));

  const std::string keys = "provider=k8s namespace=db " + creds.Keys();
  const std::string base = keys + " api_server=https://10.0.0.1";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {base, "service="},
      {base + " service=etcd colour=blue", "colour"},
      {base + " service=Etcd_1", "service='Etcd_1'"},
      {base + " service=etcd scheme=ftp", "scheme='ftp'"},
      {base + " service=etcd port_name=a-very-long-port-name", "port_name="},
      {base + " service=etcd page_size=0", "page_size='0'"},
      {base + " service=etcd timeout=soon", "timeout"},
      {base + " service=etcd cluster_domain=bad_domain", "cluster_domain="},
      {base + " service=etcd statefulset=Etcd", "statefulset="},
      {keys + " service=etcd api_server=http://10.0.0.1:80", "https"},
      {keys + " service=etcd api_server=https://10.0.0.1/api", "path"},
      {"provider=k8s service=etcd namespace=BAD api_server=https://h " + creds.Keys(), "namespace='BAD'"},
  };
  // Not a structured binding: clang 14 (the sanitizer build) cannot capture one in doctest's lambdas.
  for (const auto& c : bad) {
    auto r = Take(c.first);
    CHECK_MESSAGE(r.status().IsInvalidArgument(), c.first);
    CHECK_MESSAGE(Mentions(r.status(), c.second), r.status().message());
  }
}

TEST_CASE("k8s in-cluster settings: the service environment, and missing files named with the fix") {
  Credentials creds;
  {
    ScopedEnv host("KUBERNETES_SERVICE_HOST", "fd00::1"), port("KUBERNETES_SERVICE_PORT", "443");
    auto o = Take("provider=k8s service=etcd namespace=db " + creds.Keys());
    REQUIRE_MESSAGE(o.ok(), o.status().message());
    CHECK(o->api_server == "https://[fd00::1]:443");
  }
  {
    ScopedEnv host("KUBERNETES_SERVICE_HOST", nullptr), port("KUBERNETES_SERVICE_PORT", nullptr);
    auto o = Take("provider=k8s service=etcd namespace=db " + creds.Keys());
    CHECK(o.status().IsInvalidArgument());
    CHECK(Mentions(o.status(), "KUBERNETES_SERVICE_HOST"));
    CHECK(Mentions(o.status(), "api_server="));
  }
  auto no_token = Take("provider=k8s service=etcd namespace=db api_server=https://h token_file=" + creds.Path("none") +
                       " ca_file=" + creds.Path("ca.crt"));
  CHECK(no_token.status().IsInvalidArgument());
  CHECK(Mentions(no_token.status(), creds.Path("none")));
  CHECK(Mentions(no_token.status(), "token_file="));
  auto no_ca = Take("provider=k8s service=etcd namespace=db api_server=https://h token_file=" + creds.Path("token") +
                    " ca_file=" + creds.Path("none"));
  CHECK(Mentions(no_ca.status(), "ca_file="));
  if (!PathExists(kServiceAccountDir)) {
    auto no_ns = Take("provider=k8s service=etcd api_server=https://h " + creds.Keys());
    CHECK(no_ns.status().IsInvalidArgument());
    CHECK(Mentions(no_ns.status(), "namespace="));
  }
}

TEST_CASE("k8s request paths: the API's own, with query values escaped") {
  Options o = Defaults();
  o.label_selector = "app=etcd,tier!=cache";
  o.page_size = 50;
  CHECK(PodListPath(o, "") == "/api/v1/namespaces/db/pods?labelSelector=app%3Detcd%2Ctier%21%3Dcache&limit=50");
  CHECK(PodListPath(o, "eyJ2+/=") ==
        "/api/v1/namespaces/db/pods?labelSelector=app%3Detcd%2Ctier%21%3Dcache&limit=50&continue=eyJ2%2B%2F%3D");
  CHECK(EndpointSliceListPath(o, "") ==
        "/apis/discovery.k8s.io/v1/namespaces/db/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Detcd"
        "&limit=50");
  CHECK(StatefulSetPath(o, "etcd") == "/apis/apps/v1/namespaces/db/statefulsets/etcd");
  CHECK(PodPath(o, "etcd-0") == "/api/v1/namespaces/db/pods/etcd-0");
}

TEST_CASE("k8s member URLs: the pod's name under the headless Service") {
  Options o = Defaults();
  Member m = MemberFor(o, "etcd-0", "etcd-0", 2380, 2379);
  CHECK(m.name == "etcd-0");
  CHECK(m.peer_urls == std::vector<std::string>{"http://etcd-0.etcd.db.svc.cluster.local:2380"});
  CHECK(m.client_urls == std::vector<std::string>{"http://etcd-0.etcd.db.svc.cluster.local:2379"});
  o.cluster_domain = "";
  o.scheme = "https";
  CHECK(MemberFor(o, "etcd-1", "etcd-1", 2380, 2379).peer_urls ==
        std::vector<std::string>{"https://etcd-1.etcd.db.svc:2380"});
}

TEST_CASE("k8s pod list: named ports, fallbacks, deleting pods left out, the controller and the next page") {
  Options o = Defaults();
  auto page = ParsePodList(o, kPodList, "GET pods");
  REQUIRE_MESSAGE(page.ok(), page.status().message());
  REQUIRE(page->members.size() == 2);
  CHECK(page->members[0] == MemberFor(o, "etcd-0", "etcd-0", 12380, 12379));
  // An unnamed port is no "peer": the conventional ports.
  CHECK(page->members[1] == MemberFor(o, "etcd-2", "etcd-2", 2380, 2379));
  CHECK(page->statefulsets == std::vector<std::string>{"etcd"});
  CHECK(page->next == "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ");

  auto last = ParsePodList(o, R"({"kind":"PodList","apiVersion":"v1","metadata":{},"items":null})", "GET pods");
  REQUIRE(last.ok());
  CHECK(last->members.empty());
  CHECK(last->next.empty());
}

TEST_CASE("k8s pod list: wrong answers name the request and are retried, deep JSON included") {
  Options o = Defaults();
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"<html>502 Bad Gateway</html>", "not JSON"},
      {"[1,2]", "not an object"},
      {R"({"kind":"ServiceList","items":[]})", "kind is 'ServiceList'"},
      {R"({"kind":"PodList","items":{}})", "items is not a list"},
      {R"({"kind":"PodList","items":[{"metadata":{}}]})", "no name usable"},
      {R"({"kind":"PodList","items":[{"metadata":{"name":"p"},"spec":{"containers":[{"ports":[{"name":"peer",
           "containerPort":"x"}]}]}}]})",
       "port 'peer'"},
      // 60,000 levels in 120 KB crashed quorate, which copied the document recursively.
      {R"({"kind":"PodList","items":)" + std::string(60000, '[') + std::string(60000, ']') + "}",
       "nested deeper than 64 levels"},
      {R"({"kind":"PodList","items":[{"metadata":{"name":"etcd-0","x":)" + std::string(60000, '[') +
           std::string(60000, ']') + "}}]}",
       "nested deeper than 64 levels"},
      // A continue token goes back into the next request: CR LF, NUL or a space there is refused.
      {R"({"kind":"PodList","metadata":{"continue":"eyJ2\r\nAuthorization: Bearer x"},"items":[]})",
       "its continue token (29 bytes) holds a space, a control byte"},
      {R"({"kind":"PodList","metadata":{"continue":"eyJ2\u0000x"},"items":[]})", "its continue token (6 bytes)"},
      {R"({"kind":"PodList","metadata":{"continue":")" + std::string(4097, 'e') + R"("},"items":[]})",
       "longer than 4096 bytes"},
  };
  // What the API server answers is fetched at run time: wrong now, it may be right on the next look.
  for (const auto& [body, mention] : bad) {
    auto page = ParsePodList(o, body, "GET /api/v1/namespaces/db/pods");
    CHECK(page.status().IsUnavailable());
    CHECK_MESSAGE(Mentions(page.status(), mention), page.status().message());
    CHECK(Mentions(page.status(), "GET /api/v1/namespaces/db/pods"));
  }
}

TEST_CASE("k8s EndpointSlices: not-ready endpoints count, terminating ones do not, slice ports name the peer port") {
  Options o = Defaults();
  auto page = ParseEndpointSliceList(o, kSliceList, "GET slices");
  REQUIRE_MESSAGE(page.ok(), page.status().message());
  REQUIRE(page->members.size() == 2);
  CHECK(page->members[0] == MemberFor(o, "etcd-0", "etcd-0", 2390, 2379));
  CHECK(page->members[1] == MemberFor(o, "etcd-1", "etcd-1", 2390, 2379));
  CHECK(page->next.empty());

  auto nameless = ParseEndpointSliceList(
      o, R"({"kind":"EndpointSliceList","items":[{"metadata":{"name":"s"},"endpoints":[{"addresses":["10.0.0.1"]}]}]})",
      "GET slices");
  CHECK(nameless.status().IsUnavailable());
  CHECK(Mentions(nameless.status(), "10.0.0.1"));
}

TEST_CASE("k8s StatefulSet and Pod answers") {
  CHECK(*ParseStatefulSetReplicas(R"({"kind":"StatefulSet","spec":{"replicas":5}})", "GET sts") == 5);
  CHECK(*ParseStatefulSetReplicas(R"({"kind":"StatefulSet","spec":{}})", "GET sts") == 1);
  CHECK(ParseStatefulSetReplicas(R"({"kind":"StatefulSet","spec":{"replicas":"3"}})", "GET sts")
            .status()
            .IsUnavailable());
  CHECK(ParseStatefulSetReplicas(R"({"kind":"Status"})", "GET sts").status().IsUnavailable());
  CHECK(ParseStatefulSetReplicas(R"({"kind":"StatefulSet","spec":{"replicas":)" + std::string(60000, '[') +
                                     std::string(60000, ']') + "}}",
                                 "GET sts")
            .status()
            .IsUnavailable());
  CHECK(*ParsePodController(
            R"({"kind":"Pod","metadata":{"ownerReferences":[{"kind":"StatefulSet","name":"etcd","controller":true}]}})",
            "GET pod") == "etcd");
  CHECK(ParsePodController(R"({"kind":"Pod","metadata":{}})", "GET pod")->empty());
}

TEST_CASE("k8s: a token file with a line break inside the token is bad input, never sent, never shown") {
  Credentials creds;
  std::ofstream(creds.Path("token"), std::ios::trunc) << "s3cret\r\nX-Smuggled: 1\n";
  auto spec = ParseDiscoverySpec("provider=k8s service=etcd namespace=db api_server=https://127.0.0.1:1 " +
                                 creds.Keys());
  REQUIRE(spec.ok());
  auto provider = ProviderRegistry::Get().Create(*spec);
  REQUIRE_MESSAGE(provider.ok(), provider.status().message());
  auto members = (*provider)->Discover();
  REQUIRE_FALSE(members.ok());
  CHECK_MESSAGE(members.status().IsInvalidArgument(), members.status().message());
  CHECK(Mentions(members.status(), "token_file " + creds.Path("token") + " holds a line break"));
  CHECK_FALSE(Mentions(members.status(), "s3cret"));
  CHECK_FALSE(Mentions(members.status(), "Smuggled"));
}

TEST_CASE("k8s refusals: 403 names the RBAC rule, 404 the key, 5xx is retried") {
  Options o = Defaults();
  const std::string forbidden =
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods is forbidden: User \"system:serviceaccount:db:etcd\" cannot list resource \"pods\" in API group \"\" in the namespace \"db\"","reason":"Forbidden","details":{"kind":"pods"},"code":403})";
  Status s = Refusal(o, {"list", "pods", "", "", "/api/v1/namespaces/db/pods"}, 403, forbidden);
  CHECK(s.IsInvalidArgument());
  CHECK(Mentions(s, R"(the service account may not list pods in namespace db: add verb "list" on "pods")"));
  CHECK(Mentions(s, "cannot list resource"));
  Status sts = Refusal(o, {"get", "statefulsets", "apps", "etcd", "/apis/apps/v1/namespaces/db/statefulsets/etcd"}, 404,
                       R"({"kind":"Status","message":"statefulsets.apps \"etcd\" not found","code":404})");
  CHECK(sts.IsInvalidArgument());
  CHECK(Mentions(sts, "statefulset="));
  Status ns = Refusal(o, {"list", "pods", "", "", "/api/v1/namespaces/db/pods"}, 404, "");
  CHECK(Mentions(ns, "namespace="));
  CHECK(Refusal(o, {"list", "pods", "", "", "/p"}, 503, "upstream down").IsUnavailable());
  CHECK(Refusal(o, {"list", "pods", "", "", "/p"}, 400, "{}").IsInvalidArgument());
}

}  // namespace quorate::k8s
