// The azure provider's keys, calls and answers (discovery/azure/azure.h): the parsers on text, and
// the provider itself against a fake ARM, token endpoint and IMDS on 127.0.0.1 (plain HTTP, which
// the endpoint keys allow for tests). The provider against tests/azure/emulator.py over HTTPS, with
// real etcd, is tests/integration/azure_test.py.
#include "../../discovery/azure/azure.h"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <thread>

namespace quorate::azure {
namespace {

Result<Options> OptionsOf(const std::string& text) {
  auto spec = ParseDiscoverySpec(text);
  REQUIRE_MESSAGE(spec.ok(), spec.status().message());
  ProviderParams params(*spec);
  return TakeOptions(params);
}

void ClearEnv() {
  for (const char* name : {"ARM_TENANT_ID", "ARM_CLIENT_ID", "ARM_SUBSCRIPTION_ID", "ARM_CLIENT_SECRET", "AZURE_TENANT_ID",
                           "AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET", "AZURE_FEDERATED_TOKEN_FILE",
                           "AZURE_AUTHORITY_HOST"}) {
    unsetenv(name);
  }
}

constexpr char kVmss[] =
    "/subscriptions/sub-1/resourceGroups/etcd-rg/providers/Microsoft.Compute/"
    "virtualMachineScaleSets/etcd";

// A NIC as ARM lists it; `vm` empty: attached to none.
std::string NicJson(const std::string& id, const std::string& vm, const std::string& ip, bool primary = true,
                    const std::string& tags = "{}") {
  return R"({"name":"nic","id":")" + id + R"(","type":"Microsoft.Network/networkInterfaces","tags":)" + tags +
         R"(,"properties":{"provisioningState":"Succeeded","primary":)" + (primary ? "true" : "false") +
         (vm.empty() ? "" : R"(,"virtualMachine":{"id":")" + vm + R"("})") +
         R"(,"ipConfigurations":[{"name":"ipconfig1","properties":{"privateIPAddress":")" + ip +
         R"(","primary":true,"privateIPAddressVersion":"IPv4"}}]}})";
}

std::string VmJson(int n, const std::string& provisioning, const std::string& power) {
  return fmt::format(R"({{"name":"etcd_{0}","id":"{1}/virtualMachines/{0}","instanceId":"{0}","properties":{{)"
                     R"("provisioningState":"{2}","osProfile":{{"computerName":"etcd00000{0}"}},"instanceView":{{)"
                     R"("statuses":[{{"code":"ProvisioningState/succeeded"}}{3}]}}}}}})",
                     n, kVmss, provisioning, power.empty() ? "" : R"(,{"code":"PowerState/)" + power + R"("})");
}

// ARM, the token endpoint and IMDS in one fake, recording what was asked.
class FakeAzure {
 public:
  FakeAzure() {
    server_.Post("/tenant-1/oauth2/v2.0/token", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(mu_);
      log_.push_back("token " + req.get_param_value("grant_type") + " " + req.get_param_value("client_id") + " " +
                     req.get_param_value("scope"));
      // Workload identity: the federated token is the proof, as a client assertion.
      const bool federated = req.get_param_value("client_assertion_type") ==
                                 "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" &&
                             req.get_param_value("client_assertion") == "federated-jwt";
      if (req.get_param_value("client_secret") != "s3cret-value" && !federated) {
        res.status = 401;
        res.set_content(R"({"error":"invalid_client","error_description":"AADSTS7000215: Invalid client secret"})",
                        "application/json");
        return;
      }
      res.set_content(fmt::format(R"({{"token_type":"Bearer","expires_in":{},"access_token":"tok-{}"}})",
                                  token_lifetime_, ++tokens_),
                      "application/json");
    });
    server_.Get("/metadata/identity/oauth2/token", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(mu_);
      log_.push_back("imds token " + req.get_header_value("Metadata") + " " + req.get_param_value("resource") + " " +
                     req.get_param_value("client_id"));
      res.set_content(fmt::format(R"({{"access_token":"tok-{}","expires_in":"3599","expires_on":"{}",)"
                                  R"("resource":"https://management.azure.com/","token_type":"Bearer"}})",
                                  ++tokens_, std::time(nullptr) + 3599),
                      "application/json");
    });
    server_.Get("/metadata/instance", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(mu_);
      log_.push_back("imds instance " + req.get_header_value("Metadata") + " " + req.get_param_value("api-version"));
      res.set_content(R"({"compute":{"name":"etcd_1","resourceGroupName":"etcd-rg","subscriptionId":"sub-1",)"
                      R"("vmScaleSetName":"etcd"},"network":{}})",
                      "application/json");
    });
    server_.Get(R"(/subscriptions/.*)", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(mu_);
      log_.push_back("GET " + req.path + " " + req.get_header_value("Authorization") + " " +
                     req.get_param_value("api-version") + " " + req.get_param_value("$skiptoken") +
                     (req.has_param("$filter")
                          ? " filter=" + req.get_param_value("$filter") + " expand=" + req.get_param_value("$expand")
                          : ""));
      res.set_header("Content-Type", "application/json");
      if (throttles_ > 0) {
        --throttles_;
        res.status = 429;
        res.set_header("Retry-After", "0");
        res.body = R"({"error":{"code":"TooManyRequests","message":"slow down"}})";
        return;
      }
      auto it = answers_.find(req.path + "#" + req.get_param_value("$skiptoken"));
      if (it == answers_.end()) {
        res.status = 404;
        res.body = R"({"error":{"code":"ResourceNotFound","message":"not here"}})";
        return;
      }
      res.status = it->second.first;
      res.body = it->second.second;
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    REQUIRE(port_ > 0);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~FakeAzure() {
    server_.stop();
    thread_.join();
  }
  std::string base() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // What ARM answers to GET `path` (with $skiptoken `skip`, "" for the first page).
  void Answer(const std::string& path, const std::string& skip, int status, const std::string& body) {
    std::lock_guard lock(mu_);
    answers_[path + "#" + skip] = {status, body};
  }
  std::string Next(const std::string& path, const std::string& skip) const {
    return base() + path + "?api-version=2018-10-01&$skiptoken=" + skip;
  }
  std::vector<std::string> Log() {
    std::lock_guard lock(mu_);
    return log_;
  }
  void ClearLog() {
    std::lock_guard lock(mu_);
    log_.clear();
  }
  void set_token_lifetime(int seconds) { token_lifetime_ = seconds; }
  void set_throttles(int n) { throttles_ = n; }
  std::string Spec(const std::string& rest) const {
    return fmt::format("provider=azure endpoint={0} authority_host={0} imds_endpoint={0} {1}", base(), rest);
  }

  // A scale set of 3 (capacity 3), its VMs on one page and its NICs on two.
  void ScaleSetOfThree() {
    const std::string vm = std::string(kVmss) + "/virtualMachines/";
    Answer(kVmss, "", 200, R"({"name":"etcd","sku":{"name":"Standard_D2s_v3","capacity":3},"properties":{}})");
    Answer(std::string(kVmss) + "/virtualMachines", "", 200,
           "{\"value\":[" + VmJson(0, "Succeeded", "running") + "," + VmJson(1, "Creating", "") + "," +
               VmJson(2, "Succeeded", "running") + "]}");
    const std::string nics = std::string(kVmss) + "/networkInterfaces";
    Answer(nics, "", 200,
           "{\"value\":[" + NicJson(vm + "0/networkInterfaces/n", vm + "0", "127.0.0.2") + "," +
               NicJson(vm + "1/networkInterfaces/n", vm + "1", "127.0.0.3") + "],\"nextLink\":\"" + Next(nics, "p2") +
               "\"}");
    Answer(nics, "p2", 200, "{\"value\":[" + NicJson(vm + "2/networkInterfaces/n", vm + "2", "127.0.0.4") + "]}");
  }

 private:
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  std::vector<std::string> log_;
  std::map<std::string, std::pair<int, std::string>> answers_;
  std::atomic<int> token_lifetime_{3599};
  std::atomic<int> throttles_{0};
  int tokens_ = 0;
};

std::unique_ptr<DiscoveryProvider> Provider(const std::string& text) {
  auto spec = ParseDiscoverySpec(text);
  REQUIRE_MESSAGE(spec.ok(), spec.status().message());
  ProviderContext context;
  context.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  auto provider = ProviderRegistry::Get().Create(*spec, context);
  REQUIRE_MESSAGE(provider.ok(), provider.status().message());
  return std::move(*provider);
}

std::vector<std::string> Names(const std::vector<Member>& members) {
  std::vector<std::string> names;
  for (const Member& m : members) names.push_back(m.name);
  return names;
}

}  // namespace

TEST_CASE("azure: keys as go-discover spells them, ARM_* for the credentials they leave out, bad input named") {
  ClearEnv();
  auto vmss = OptionsOf("provider=azure subscription_id=sub-1 resource_group=etcd-rg vm_scale_set=etcd");
  REQUIRE_MESSAGE(vmss.ok(), vmss.status().message());
  CHECK(vmss->endpoint == "https://management.azure.com:443");
  CHECK(vmss->authority_host == "https://login.microsoftonline.com:443");
  CHECK(vmss->arm_resource == "https://management.azure.com/");
  // A sovereign cloud: its ARM, identity platform and token resource; a given endpoint keeps the
  // cloud's resource (the token is for that cloud's ARM, whatever address reaches it).
  auto gov =
      OptionsOf("provider=azure environment=usgovernment subscription_id=sub-1 resource_group=rg vm_scale_set=e");
  REQUIRE_MESSAGE(gov.ok(), gov.status().message());
  CHECK(gov->endpoint == "https://management.usgovcloudapi.net:443");
  CHECK(gov->authority_host == "https://login.microsoftonline.us:443");
  CHECK(gov->arm_resource == "https://management.usgovcloudapi.net/");
  auto china = OptionsOf(
      "provider=azure environment=china endpoint=https://127.0.0.1:8443 subscription_id=s resource_group=rg "
      "vm_scale_set=e");
  REQUIRE_MESSAGE(china.ok(), china.status().message());
  CHECK(china->endpoint == "https://127.0.0.1:8443");
  CHECK(china->authority_host == "https://login.chinacloudapi.cn:443");
  CHECK(china->arm_resource == "https://management.chinacloudapi.cn/");
  CHECK(vmss->imds_endpoint == "http://169.254.169.254:80");
  CHECK(vmss->credentials->Source() == "the managed identity");
  CHECK(vmss->peer_port == 2380);
  auto tags = OptionsOf(
      "provider=azure tenant_id=t client_id=c subscription_id=s secret_access_key=x tag_name=role "
      "tag_value=etcd endpoint=https://127.0.0.1:8443/ name_tag=member peer_port=12380 scheme=https "
      "ca_file=/etc/ca.pem");
  REQUIRE_MESSAGE(tags.ok(), tags.status().message());
  CHECK(tags->endpoint == "https://127.0.0.1:8443");
  CHECK(tags->credentials->Source() == "the client secret of client c");
  CHECK_FALSE(tags->scale_set());
  auto self = OptionsOf("provider=azure vm_scale_set=auto");  // all from IMDS
  REQUIRE_MESSAGE(self.ok(), self.status().message());
  CHECK(self->subscription_id.empty());

  setenv("ARM_TENANT_ID", "tenant-env", 1);
  setenv("ARM_CLIENT_ID", "client-env", 1);
  setenv("ARM_SUBSCRIPTION_ID", "sub-env", 1);
  setenv("ARM_CLIENT_SECRET", "secret-env", 1);
  auto env = OptionsOf("provider=azure resource_group=rg vm_scale_set=etcd");
  REQUIRE_MESSAGE(env.ok(), env.status().message());
  CHECK(env->credentials->Source() == "the client secret of client client-env");
  CHECK(env->subscription_id == "sub-env");
  unsetenv("ARM_TENANT_ID");
  // A secret from the environment without its tenant: bad input, and the message does not show it.
  auto half = OptionsOf("provider=azure resource_group=rg vm_scale_set=etcd");
  REQUIRE_FALSE(half.ok());
  CHECK(half.status().IsInvalidArgument());
  CHECK(half.status().message().find("secret-env") == std::string::npos);
  ClearEnv();

  for (const char* bad : {
           "provider=azure subscription_id=s",  // neither pair
           "provider=azure subscription_id=s tag_name=role tag_value=etcd resource_group=rg vm_scale_set=etcd",
           "provider=azure subscription_id=s tag_name=role resource_group=rg",  // halves of both
           "provider=azure subscription_id=s tag_name=role",                    // half a pair
           "provider=azure subscription_id=s tag_value=etcd",
           "provider=azure subscription_id=s resource_group=rg",
           "provider=azure subscription_id=s vm_scale_set=etcd",
           "provider=azure resource_group=rg vm_scale_set=etcd",                                    // no subscription
           "provider=azure subscription_id=s resource_group=rg vm_scale_set=etcd vm_scale_sett=x",  // misspelt
           "provider=azure subscription_id=s resource_group=rg vm_scale_set=etcd addr_type=public_v4",
           "provider=azure subscription_id=s resource_group=rg vm_scale_set=etcd secret_access_key=x",
           "provider=azure subscription_id=s resource_group=rg vm_scale_set=etcd tenant_id=t",
           "provider=azure subscription_id=s resource_group=rg vm_scale_set=etcd endpoint=https://h/path",
           "provider=azure subscription_id=s resource_group=rg vm_scale_set=etcd authority_host=login",
           "provider=azure subscription_id=s resource_group=rg vm_scale_set=etcd environment=AzureCloud",
           "provider=azure subscription_id=s resource_group=rg vm_scale_set=etcd peer_port=0",
           "provider=azure subscription_id=s resource_group=rg vm_scale_set=etcd scheme=ftp",
           "provider=azure subscription_id=s resource_group=r/g vm_scale_set=etcd",
           "provider=azure subscription_id=s resource_group=rg vm_scale_set=et?cd",
           "provider=azure subscription_id=s/../x resource_group=rg vm_scale_set=etcd",
           "provider=azure resource_group=rg vm_scale_set=auto",
       }) {
    CAPTURE(bad);
    auto r = OptionsOf(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().IsInvalidArgument());
  }
}

TEST_CASE("azure: NIC lists: the primary address, tags, nextLink; answers that are not lists refused") {
  const std::string vm = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/etcd-a";
  auto page = ParseNicList(R"({"value":[)" + NicJson("/nic1", vm, "10.0.0.4", true, R"({"Role":"etcd","n":"a"})") +
                           "," + NicJson("/nic2", "", "10.0.0.9") +
                           R"(,{"id":"/nic3","properties":{"ipConfigurations":[
                               {"properties":{"privateIPAddress":"fd00::1","privateIPAddressVersion":"IPv6"}},
                               {"properties":{"privateIPAddress":"10.0.1.1"}},
                               {"properties":{"privateIPAddress":"10.0.1.2","primary":true}}]}}],
                            "nextLink":"https://management.azure.com/subscriptions/s/providers/x?$skiptoken=2"})");
  REQUIRE_MESSAGE(page.ok(), page.status().message());
  REQUIRE(page->nics.size() == 3);
  CHECK(page->nics[0].vm_id == vm);
  CHECK(page->nics[0].primary);
  CHECK(page->nics[0].private_ip == "10.0.0.4");
  CHECK(page->nics[0].tags.at("Role") == "etcd");
  CHECK(page->nics[1].vm_id.empty());
  CHECK(page->nics[2].private_ip == "10.0.1.2");
  CHECK(page->next_link == "https://management.azure.com/subscriptions/s/providers/x?$skiptoken=2");
  CHECK(ParseNicList(R"({"value":[]})")->next_link.empty());
  for (const char* garbage : {"<html>proxy</html>", "{}", R"({"value":{}})", R"({"value":[{"name":"no id"}]})",
                              R"({"value":[],"nextLink":7})", "[]"}) {
    CAPTURE(garbage);
    CHECK(ParseNicList(garbage).status().IsUnavailable());
  }
}

TEST_CASE("azure: scale set instances count while created or running; capacity, IMDS, errors, tokens") {
  auto vms =
      ParseScaleSetVms("{\"value\":[" + VmJson(0, "Succeeded", "running") + "," + VmJson(1, "Deleting", "running") +
                       "," + VmJson(2, "Creating", "") + "," + VmJson(3, "Succeeded", "deallocated") + "]}");
  REQUIRE_MESSAGE(vms.ok(), vms.status().message());
  REQUIRE(vms->vms.size() == 4);
  CHECK(vms->vms[0].computer_name == "etcd000000");
  CHECK(vms->vms[0].power_state == "running");
  CHECK(Counts(vms->vms[0]));
  CHECK_FALSE(Counts(vms->vms[1]));  // being deleted
  CHECK(Counts(vms->vms[2]));        // being created: no power state yet, its address known
  CHECK_FALSE(Counts(vms->vms[3]));
  for (const char* power : {"starting", "running"}) CHECK(Counts({"i", "n", "c", "Updating", power}));
  for (const char* power : {"stopping", "stopped", "deallocating", "deallocated"}) {
    CHECK_FALSE(Counts({"i", "n", "c", "Succeeded", power}));
  }
  CHECK(ParseScaleSetVms(R"({"value":[{"name":"x"}]})").status().IsUnavailable());

  auto set = ParseScaleSet(R"({"sku":{"name":"Standard_D2s_v3","capacity":5},"properties":{}})");
  REQUIRE(set.ok());
  CHECK(set->capacity == 5);
  CHECK_FALSE(set->flexible);  // made before orchestration modes: Uniform
  CHECK(ParseScaleSet(R"({"sku":{"capacity":3},"properties":{"orchestrationMode":"Flexible"}})")->flexible);
  CHECK_FALSE(ParseScaleSet(R"({"sku":{"capacity":3},"properties":{"orchestrationMode":"Uniform"}})")->flexible);
  for (const char* bad : {R"({"sku":{"capacity":-1}})", R"({"sku":{"capacity":"3"}})", R"({"sku":{}})", "{}",
                          R"({"sku":{"capacity":3.5}})", R"({"sku":{"capacity":99999999999}})", "<html/>",
                          R"({"sku":{"capacity":3},"properties":{"orchestrationMode":"Elastic"}})"}) {
    CAPTURE(bad);
    CHECK(ParseScaleSet(bad).status().IsUnavailable());
  }

  auto imds = ParseInstanceMetadata(R"({"compute":{"subscriptionId":"sub-1","resourceGroupName":"etcd-rg",)"
                                    R"("vmScaleSetName":"etcd","name":"etcd_1"}})");
  REQUIRE_MESSAGE(imds.ok(), imds.status().message());
  CHECK(imds->vm_scale_set == "etcd");
  CHECK(imds->resource_group == "etcd-rg");
  CHECK(ParseInstanceMetadata(R"({"compute":{"subscriptionId":"s","resourceGroupName":"rg"}})")->vm_scale_set.empty());
  CHECK(ParseInstanceMetadata(R"({"compute":{"subscriptionId":"s","resourceGroupName":"../x"}})")
            .status()
            .IsUnavailable());
  CHECK(ParseInstanceMetadata("not json").status().IsUnavailable());

  auto arm = cloud::ParseAzureError(R"({"error":{"code":"AuthorizationFailed","message":"no read"}})");
  CHECK(arm.code == "AuthorizationFailed");
  CHECK(arm.message == "no read");
  auto aad = cloud::ParseAzureError(R"({"error":"invalid_client","error_description":"AADSTS7000215"})");
  CHECK(aad.code == "invalid_client");
  CHECK(aad.message == "AADSTS7000215");
  CHECK(cloud::ParseAzureError("<html/>").code.empty());

  const auto now = std::chrono::system_clock::from_time_t(1795550400);
  auto v2 = cloud::ParseAzureToken(R"({"token_type":"Bearer","expires_in":3599,"access_token":"abc"})", now);
  REQUIRE(v2.ok());
  CHECK(v2->access_token == "abc");
  CHECK(v2->expires == now + std::chrono::seconds(3599));
  auto mi =
      cloud::ParseAzureToken(R"({"access_token":"def","expires_in":"86399","expires_on":"1795551000","token_type":"Bearer"})", now);
  REQUIRE(mi.ok());
  CHECK(mi->expires == std::chrono::system_clock::from_time_t(1795551000));
  for (const char* bad :
       {R"({"expires_in":3599})", R"({"access_token":"a"})", R"({"access_token":"a","expires_in":"x"})",
        R"({"access_token":"a","expires_in":3599,"token_type":"mac"})",
        R"({"access_token":"a","expires_on":"99999999999"})", "<html/>"}) {
    CAPTURE(bad);
    CHECK(cloud::ParseAzureToken(bad, now).status().IsUnavailable());
  }
}

TEST_CASE("azure: members: a VM's primary NIC, named by computer name, VM name or name_tag") {
  const std::string vm = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/";
  Options o;
  std::vector<Nic> nics = {
      {"/nic-b2", vm + "etcd-b", false, "10.0.0.12", {}},
      {"/nic-b1", vm + "etcd-b", true, "10.0.0.11", {}},
      {"/nic-a", vm + "etcd-a", true, "10.0.0.10", {{"member", "alpha"}}},
      {"/nic-free", "", true, "10.0.0.99", {}},  // attached to no VM
      {"/nic-c", vm + "etcd-c", true, "", {}},   // no address yet
  };
  auto members = MembersOf(o, nics, nullptr);
  REQUIRE_MESSAGE(members.ok(), members.status().message());
  CHECK(Names(*members) == std::vector<std::string>{"etcd-a", "etcd-b"});
  CHECK((*members)[1].peer_urls == std::vector<std::string>{"http://10.0.0.11:2380"});
  CHECK((*members)[1].client_urls == std::vector<std::string>{"http://10.0.0.11:2379"});
  o.name_tag = "member";
  o.scheme = "https";
  o.peer_port = 12380;
  members = MembersOf(o, nics, nullptr);
  REQUIRE(members.ok());
  CHECK(Names(*members) == std::vector<std::string>{"alpha", "etcd-b"});
  CHECK((*members)[0].peer_urls == std::vector<std::string>{"https://10.0.0.10:12380"});

  // Scale set instances: only those that count, by computer name; IDs compared without case.
  std::vector<ScaleSetVm> vms = {{"/VMSS/etcd/virtualMachines/0", "etcd_0", "etcd000000", "Succeeded", "running"},
                                 {"/vmss/etcd/virtualMachines/1", "etcd_1", "", "Succeeded", "running"},
                                 {"/vmss/etcd/virtualMachines/2", "etcd_2", "etcd000002", "Deleting", "running"}};
  std::vector<Nic> set_nics = {{"/n0", "/vmss/etcd/virtualmachines/0", true, "127.0.0.2", {}},
                               {"/n1", "/vmss/etcd/virtualMachines/1", true, "127.0.0.3", {}},
                               {"/n2", "/vmss/etcd/virtualMachines/2", true, "127.0.0.4", {}},
                               {"/n9", "/vmss/etcd/virtualMachines/9", true, "127.0.0.9", {}}};
  members = MembersOf(Options{}, set_nics, &vms);
  REQUIRE(members.ok());
  CHECK(Names(*members) == std::vector<std::string>{"etcd000000", "etcd_1"});

  // Names etcd would refuse, or two VMs of one name, are the answer's fault: Unavailable.
  vms[0].computer_name = "a=b";
  CHECK(MembersOf(Options{}, set_nics, &vms).status().IsUnavailable());
  vms[0].computer_name = "etcd_1";
  CHECK(MembersOf(Options{}, set_nics, &vms).status().IsUnavailable());
}

TEST_CASE("azure: a nextLink is followed only on the endpoint and list it came from, and only when it is a URL") {
  const std::string listed = "/subscriptions/s/providers/x?api-version=1";
  CHECK(*NextTarget("https://management.azure.com:443", listed,
                    "https://Management.Azure.com/subscriptions/s/providers/x?api-version=1&$skiptoken=x") ==
        "/subscriptions/s/providers/x?api-version=1&$skiptoken=x");
  CHECK(*NextTarget("http://127.0.0.1:8080", "/a", "http://127.0.0.1:8080/a?$skiptoken=2") == "/a?$skiptoken=2");
  CHECK_FALSE(NextTarget("https://management.azure.com:443", listed, "https://evil.example.com/subscriptions/s/providers/x?a"));
  CHECK_FALSE(NextTarget("https://management.azure.com:443", listed, "http://management.azure.com/subscriptions/s/providers/x?a"));
  CHECK_FALSE(NextTarget("https://management.azure.com:443", listed, "https://management.azure.com:8443/subscriptions/s/providers/x?a"));
  CHECK_FALSE(NextTarget("https://management.azure.com:443", listed, "/subscriptions/s/providers/x?a"));
  // Another list of the same origin (where the token reads more than asked), or none.
  CHECK_FALSE(NextTarget("https://management.azure.com:443", listed, "https://management.azure.com/subscriptions/s/keys?a"));
  CHECK_FALSE(NextTarget("https://management.azure.com:443", listed, "https://management.azure.com/subscriptions/s/providers/xy?a"));
  CHECK_FALSE(NextTarget("https://management.azure.com:443", listed, "https://management.azure.com/subscriptions/s/providers/x"));
  // CR LF, NUL or a space would shape a request of the answer's own, carrying the bearer token.
  for (const std::string& bad : {std::string("\r\nGET /steal HTTP/1.1\r\nHost: x"), std::string("\0x", 2),
                                std::string(" HTTP/1.1"), std::string("\n")}) {
    CAPTURE(bad);
    CHECK_FALSE(NextTarget("https://management.azure.com:443", listed,
                           "https://management.azure.com/subscriptions/s/providers/x?$skiptoken=1" + bad));
  }
}

TEST_CASE("azure: hostile answers: garbled tokens never shown, addresses no member has, a group too big") {
  const auto now = std::chrono::system_clock::now();
  for (const std::string& answer : {std::string("eyJ0eXAi.secret-token not json"),
                                   std::string(R"({"access_token":"eyJ0eXAi.secret\r\nX: 1","expires_in":"3599"})"),
                                   std::string(R"({"access_token":"eyJ0eXAi.secret\u0000","expires_in":"3599"})"),
                                   std::string(R"({"access_token":"eyJ0eXAi.secret","token_type":"eyJ0eXAi.x","expires_in":1})")}) {
    auto token = cloud::ParseAzureToken(answer, now);
    CAPTURE(answer);
    REQUIRE_FALSE(token.ok());
    CHECK(token.status().IsUnavailable());
    CHECK(token.status().message().find("eyJ0eXAi") == std::string::npos);
  }
  const std::string vm = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/";
  for (const char* ip : {"0.0.0.0", "255.255.255.255", "300.1.1.1", "239.0.0.1", "etcd.internal", "10.0.0.1\r\n"}) {
    CAPTURE(ip);
    auto members = MembersOf(Options{}, {{"/nic-a", vm + "etcd-a", true, ip, {}}}, nullptr);
    REQUIRE_FALSE(members.ok());
    CHECK(members.status().IsUnavailable());
  }
  // Two VMs of one address are the answer's fault too.
  auto same = MembersOf(Options{}, {{"/nic-a", vm + "etcd-a", true, "10.0.0.1", {}}, {"/nic-b", vm + "etcd-b", true, "10.0.0.1", {}}},
                        nullptr);
  CHECK(same.status().IsUnavailable());
  CHECK(ParseScaleSet(R"({"sku":{"capacity":10000}})").status().IsUnavailable());
  CHECK(ParseScaleSet(R"({"sku":{"capacity":99}})").ok());
}

TEST_CASE("azure: a scale set read whole: every page, the size from sku.capacity, one token while it holds") {
  ClearEnv();
  FakeAzure fake;
  fake.ScaleSetOfThree();
  auto provider =
      Provider(fake.Spec("tenant_id=tenant-1 client_id=app-1 secret_access_key=s3cret-value subscription_id=sub-1 "
                         "resource_group=etcd-rg vm_scale_set=etcd"));
  CHECK_FALSE(provider->ListsWholeGroup());
  auto members = provider->Discover();
  REQUIRE_MESSAGE(members.ok(), members.status().message());
  CHECK(Names(*members) == std::vector<std::string>{"etcd000000", "etcd000001", "etcd000002"});
  CHECK((*members)[2].peer_urls == std::vector<std::string>{"http://127.0.0.4:2380"});
  CHECK(provider->ImpliedSize() == std::optional<size_t>(3));
  CHECK(provider->ListsWholeGroup());
  CHECK(provider->Describe() == "azure scale set etcd in resource group etcd-rg");
  const std::string nics = std::string(kVmss) + "/networkInterfaces";
  CHECK(fake.Log() == std::vector<std::string>{
                          "token client_credentials app-1 https://management.azure.com/.default",
                          fmt::format("GET {} Bearer tok-1 2023-09-01 ", kVmss),
                          fmt::format("GET {}/virtualMachines Bearer tok-1 2023-09-01 ", kVmss),
                          fmt::format("GET {} Bearer tok-1 2018-10-01 ", nics),
                          fmt::format("GET {} Bearer tok-1 2018-10-01 p2", nics),
                      });

  // The token is kept while it has more than 5 minutes to live; a throttle is waited out.
  fake.ClearLog();
  fake.set_throttles(2);
  REQUIRE(provider->Discover().ok());
  auto log = fake.Log();
  CHECK(log.size() == 6);
  CHECK(std::count_if(log.begin(), log.end(), [](const std::string& l) { return l.rfind("token", 0) == 0; }) == 0);

  // A token is kept while more than 5 minutes are left of it; one at its end is fetched again before
  // the calls.
  SUBCASE("refresh") {
    const std::string spec =
        "tenant_id=tenant-1 client_id=app-1 secret_access_key=s3cret-value subscription_id=sub-1 "
        "resource_group=etcd-rg vm_scale_set=etcd";
    auto short_lived = Provider(fake.Spec(spec));
    fake.set_token_lifetime(400);
    fake.ClearLog();
    REQUIRE(short_lived->Discover().ok());
    REQUIRE(short_lived->Discover().ok());
    auto tokens = [&] {
      log = fake.Log();
      return std::count_if(log.begin(), log.end(), [](const std::string& l) { return l.rfind("token", 0) == 0; });
    };
    CHECK(tokens() == 1);
    auto expiring = Provider(fake.Spec(spec));
    fake.set_token_lifetime(0);
    fake.ClearLog();
    REQUIRE(expiring->Discover().ok());
    REQUIRE(expiring->Discover().ok());
    CHECK(tokens() == 2);
    CHECK(log.back().find("Bearer tok-4 ") != std::string::npos);
  }
  // A 401 drops the token: the next Discover() fetches another.
  SUBCASE("401") {
    fake.Answer(kVmss, "", 401,
                R"({"error":{"code":"InvalidAuthenticationToken","message":"The access token is invalid."}})");
    auto failed = provider->Discover();
    REQUIRE_FALSE(failed.ok());
    CHECK(failed.status().message().find("Microsoft.Compute/virtualMachineScaleSets/read") != std::string::npos);
    fake.ScaleSetOfThree();
    fake.ClearLog();
    REQUIRE(provider->Discover().ok());
    CHECK(fake.Log().front() == "token client_credentials app-1 https://management.azure.com/.default");
  }
  // A refusal names the permission, and the group is no longer known to be whole.
  SUBCASE("403") {
    fake.Answer(nics, "p2", 403,
                R"({"error":{"code":"AuthorizationFailed","message":"The client does not have authorization"}})");
    auto failed = provider->Discover();
    REQUIRE_FALSE(failed.ok());
    CHECK(failed.status().IsUnavailable());
    CHECK(failed.status().message().find("Microsoft.Compute/virtualMachineScaleSets/networkInterfaces/read") !=
          std::string::npos);
    CHECK(failed.status().message().find("AuthorizationFailed") != std::string::npos);
    CHECK_FALSE(provider->ListsWholeGroup());
  }
  SUBCASE("a nextLink elsewhere") {
    fake.Answer(nics, "", 200, R"({"value":[],"nextLink":"https://attacker.example.com/steal"})");
    auto failed = provider->Discover();
    REQUIRE_FALSE(failed.ok());
    CHECK(failed.status().message().find("leads away") != std::string::npos);
  }
  SUBCASE("a nextLink that comes round again") {
    fake.Answer(nics, "p2", 200, "{\"value\":[],\"nextLink\":\"" + fake.Next(nics, "p2") + "\"}");
    CHECK(provider->Discover().status().message().find("came round again") != std::string::npos);
  }
  SUBCASE("garbage") {
    fake.Answer(kVmss, "", 200, "<html>captive portal</html>");
    auto failed = provider->Discover();
    REQUIRE_FALSE(failed.ok());
    CHECK(failed.status().IsUnavailable());
    CHECK(failed.status().message().find("sku.capacity") == std::string::npos);
    // Named by its size, none of it quoted (DESIGN §2): a garbled answer may hold a token.
    CHECK(failed.status().message().find("(27 bytes) is not ARM's scale set resource") != std::string::npos);
    CHECK(failed.status().message().find("captive portal") == std::string::npos);
  }
}

TEST_CASE("azure: a Flexible scale set: its resource group's VMs filtered by the set, and the group's NICs") {
  ClearEnv();
  FakeAzure fake;
  const std::string group = "/subscriptions/sub-1/resourceGroups/etcd-rg/providers";
  const std::string vm = group + "/Microsoft.Compute/virtualMachines/";
  fake.Answer(kVmss, "", 200, R"({"name":"etcd","sku":{"capacity":2},"properties":{"orchestrationMode":"Flexible"}})");
  fake.Answer(
      group + "/Microsoft.Compute/virtualMachines", "", 200,
      R"({"value":[{"name":"etcd_a1","id":")" + vm +
          R"(etcd_a1","properties":{"provisioningState":"Succeeded",)"
          R"("osProfile":{"computerName":"etcd-a1"},"instanceView":{"statuses":[{"code":"PowerState/running"}]}}},)"
          R"({"name":"etcd_b2","id":")" +
          vm +
          R"(etcd_b2","properties":{"provisioningState":"Succeeded",)"
          R"("osProfile":{"computerName":"etcd-b2"},"instanceView":{"statuses":[{"code":"PowerState/stopped"}]}}}]})");
  // The group's NICs include one of another VM, not in the set.
  fake.Answer(group + "/Microsoft.Network/networkInterfaces", "", 200,
              "{\"value\":[" + NicJson("/n1", vm + "etcd_a1", "127.0.0.2") + "," +
                  NicJson("/n2", vm + "etcd_b2", "127.0.0.3") + "," + NicJson("/n3", vm + "bastion", "127.0.0.9") +
                  "]}");
  auto provider =
      Provider(fake.Spec("tenant_id=tenant-1 client_id=app-1 secret_access_key=s3cret-value "
                         "subscription_id=sub-1 resource_group=etcd-rg vm_scale_set=etcd"));
  auto members = provider->Discover();
  REQUIRE_MESSAGE(members.ok(), members.status().message());
  CHECK(Names(*members) == std::vector<std::string>{"etcd-a1"});
  CHECK(provider->ImpliedSize() == std::optional<size_t>(2));
  CHECK(provider->ListsWholeGroup());
  auto log = fake.Log();
  REQUIRE(log.size() == 4);
  CHECK(log[2] == fmt::format("GET {}/Microsoft.Compute/virtualMachines Bearer tok-1 2023-09-01  filter="
                              "virtualMachineScaleSet/id eq '{}' expand=instanceView",
                              group, kVmss));
  CHECK(log[3] == fmt::format("GET {}/Microsoft.Network/networkInterfaces Bearer tok-1 2023-09-01 ", group));
}

TEST_CASE("azure: in a sovereign cloud the client secret is exchanged for a token of that cloud's ARM") {
  ClearEnv();
  FakeAzure fake;
  fake.ScaleSetOfThree();
  auto provider =
      Provider(fake.Spec("environment=china tenant_id=tenant-1 client_id=app-1 secret_access_key=s3cret-value "
                         "subscription_id=sub-1 resource_group=etcd-rg vm_scale_set=etcd"));
  REQUIRE(provider->Discover().ok());
  REQUIRE_FALSE(fake.Log().empty());
  CHECK(fake.Log().front() == "token client_credentials app-1 https://management.chinacloudapi.cn/.default");
}

TEST_CASE("azure: workload identity: the federated token file is exchanged at AZURE_AUTHORITY_HOST") {
  ClearEnv();
  FakeAzure fake;
  fake.ScaleSetOfThree();
  const std::string file = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/quorate-azure-" +
                           std::to_string(::getpid()) + "-federated";
  std::ofstream(file) << "federated-jwt\n";
  setenv("AZURE_FEDERATED_TOKEN_FILE", file.c_str(), 1);
  setenv("AZURE_CLIENT_ID", "app-1", 1);
  setenv("AZURE_TENANT_ID", "tenant-1", 1);
  setenv("AZURE_AUTHORITY_HOST", fake.base().c_str(), 1);
  auto provider = Provider(fmt::format("provider=azure endpoint={0} imds_endpoint=http://127.0.0.1:1 "
                                       "subscription_id=sub-1 resource_group=etcd-rg vm_scale_set=etcd",
                                       fake.base()));
  auto members = provider->Discover();
  REQUIRE_MESSAGE(members.ok(), members.status().message());
  CHECK(members->size() == 3);
  CHECK(fake.Log().front() == "token client_credentials app-1 https://management.azure.com/.default");
  // Without its client and tenant, the file is bad input.
  unsetenv("AZURE_TENANT_ID");
  auto spec = ParseDiscoverySpec("provider=azure subscription_id=s resource_group=rg vm_scale_set=etcd");
  REQUIRE(spec.ok());
  auto half = ProviderRegistry::Get().Create(*spec, ProviderContext{});
  REQUIRE_FALSE(half.ok());
  CHECK(half.status().IsInvalidArgument());
  CHECK(half.status().message().find("AZURE_TENANT_ID") != std::string::npos);
  ClearEnv();
  std::remove(file.c_str());
}

TEST_CASE("azure: a wrong client secret is named, never shown") {
  ClearEnv();
  FakeAzure fake;
  fake.ScaleSetOfThree();
  auto provider =
      Provider(fake.Spec("tenant_id=tenant-1 client_id=app-1 secret_access_key=wrong-secret-value "
                         "subscription_id=sub-1 resource_group=etcd-rg vm_scale_set=etcd"));
  auto failed = provider->Discover();
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.status().IsUnavailable());
  CHECK(failed.status().message().find("invalid_client") != std::string::npos);
  CHECK(failed.status().message().find("client secret") != std::string::npos);
  CHECK(failed.status().message().find("wrong-secret-value") == std::string::npos);
}

TEST_CASE("azure: the managed identity and vm_scale_set=auto from IMDS; tags across the subscription") {
  ClearEnv();
  FakeAzure fake;
  fake.ScaleSetOfThree();
  auto provider = Provider(fake.Spec("vm_scale_set=auto client_id=user-assigned-1"));
  auto members = provider->Discover();
  REQUIRE_MESSAGE(members.ok(), members.status().message());
  CHECK(members->size() == 3);
  CHECK(provider->ImpliedSize() == std::optional<size_t>(3));
  auto log = fake.Log();
  REQUIRE(log.size() == 6);
  CHECK(log[0] == "imds instance true 2021-02-01");
  CHECK(log[1] == "imds token true https://management.azure.com/ user-assigned-1");
  CHECK(log[2].find("Bearer tok-1") != std::string::npos);
  // In a sovereign cloud the managed identity's token is for that cloud's ARM.
  fake.ClearLog();
  REQUIRE(Provider(fake.Spec("environment=usgovernment vm_scale_set=auto client_id=user-assigned-1"))->Discover().ok());
  REQUIRE(fake.Log().size() > 1);
  CHECK(fake.Log()[1] == "imds token true https://management.usgovcloudapi.net/ user-assigned-1");

  const std::string all = "/subscriptions/sub-1/providers/Microsoft.Network/networkInterfaces";
  const std::string vm = "/subscriptions/sub-1/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/";
  fake.Answer(all, "", 200,
              "{\"value\":[" + NicJson("/n1", vm + "etcd-1", "127.0.0.2", true, R"({"ROLE":"etcd"})") + "," +
                  NicJson("/n2", vm + "web-1", "127.0.0.3", true, R"({"role":"web"})") + "," +
                  NicJson("/n3", vm + "etcd-2", "127.0.0.4", true, R"({"role":"Etcd"})") + "],\"nextLink\":\"" +
                  fake.base() + all + "?api-version=2023-09-01&$skiptoken=2\"}");
  fake.Answer(all, "2", 200,
              "{\"value\":[" + NicJson("/n4", vm + "etcd-3", "127.0.0.5", true, R"({"role":"etcd"})") + "]}");
  auto tagged = Provider(fake.Spec("subscription_id=sub-1 tag_name=role tag_value=etcd"));
  members = tagged->Discover();
  REQUIRE_MESSAGE(members.ok(), members.status().message());
  // Tag names match without case, as in Azure; values exactly.
  CHECK(Names(*members) == std::vector<std::string>{"etcd-1", "etcd-3"});
  CHECK_FALSE(tagged->ImpliedSize());
  CHECK_FALSE(tagged->ListsWholeGroup());
}

}  // namespace quorate::azure
