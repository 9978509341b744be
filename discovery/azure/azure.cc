#include "azure.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <charconv>
#include <functional>

#include "discovery/cloud/api.h"
#include "discovery/cloud/cloud.h"
#include "net/cloud/azure_credentials.h"
#include "net/cloud/opaque.h"
#include "quorate/env.h"
#include "quorate/http.h"
#include "quorate/json.h"
#include "quorate/text.h"

namespace quorate::azure {
namespace {

using nlohmann::json;

constexpr char kNetworkVersion[] = "2023-09-01";
// The scale set NIC list exists only in this version of Microsoft.Compute's network API (the
// version Azure's own SDKs pin for it).
constexpr char kScaleSetNicVersion[] = "2018-10-01";
constexpr char kComputeVersion[] = "2023-09-01";
constexpr char kImdsInstanceVersion[] = "2021-02-01";
// A page of NICs is at most a few hundred KB; VMs with their instance view a few MB.
constexpr size_t kMaxAnswerBytes = 8 << 20;
// nextLinks (with their $skiptoken) run to a few KB.
constexpr size_t kMaxTokenBytes = 16 * 1024;

std::string Lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

bool OnlyOf(const std::string& text, const char* allowed) {
  return !text.empty() && text.find_first_not_of(allowed) == std::string::npos;
}

constexpr char kAlnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
// Azure's rules for the names that go into a resource path (resource group: letters, digits,
// . _ - ( ); scale set: letters, digits, . _ -), so none needs escaping there.
bool IsResourceGroup(const std::string& s) {
  return s.size() <= 90 && OnlyOf(s, (std::string(kAlnum) + "._-()").c_str());
}
bool IsScaleSetName(const std::string& s) { return s.size() <= 64 && OnlyOf(s, (std::string(kAlnum) + "._-").c_str()); }
bool IsGuidOrDomain(const std::string& s) { return s.size() <= 253 && OnlyOf(s, (std::string(kAlnum) + ".-").c_str()); }

// scheme://host[:port] and what follows, the host lowercased, the port the scheme's own if none.
struct Origin {
  std::string scheme, host;
  int port = 0;
  std::string rest;  // path and query, "" or starting with '/' or '?'
  std::string Base() const {
    return fmt::format("{}://{}:{}", scheme, host.find(':') == std::string::npos ? host : "[" + host + "]", port);
  }
};

std::optional<Origin> SplitUrl(const std::string& text) {
  Origin o;
  const size_t sep = text.find("://");
  if (sep == std::string::npos) return std::nullopt;
  o.scheme = Lower(text.substr(0, sep));
  if (o.scheme != "http" && o.scheme != "https") return std::nullopt;
  const size_t end = text.find_first_of("/?#", sep + 3);
  std::string authority = text.substr(sep + 3, end == std::string::npos ? std::string::npos : end - sep - 3);
  o.rest = end == std::string::npos ? "" : text.substr(end);
  if (o.rest.find('#') != std::string::npos) return std::nullopt;
  std::string port;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string::npos) return std::nullopt;
    o.host = authority.substr(1, close - 1);
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') return std::nullopt;
      port = authority.substr(close + 2);
    }
  } else {
    const size_t colon = authority.rfind(':');
    o.host = authority.substr(0, colon);
    if (colon != std::string::npos) port = authority.substr(colon + 1);
  }
  o.host = Lower(o.host);
  if (o.host.empty() || !OnlyOf(o.host, (std::string(kAlnum) + ".-:").c_str())) return std::nullopt;
  if (port.empty()) {
    o.port = o.scheme == "https" ? 443 : 80;
  } else {
    auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), o.port);
    if (ec != std::errc() || p != port.data() + port.size() || o.port < 1 || o.port > 65535) return std::nullopt;
  }
  return o;
}

Result<std::string> BaseUrl(ProviderParams& params, const std::string& key, const std::string& fallback) {
  auto text = params.Take(key);
  if (!text) return fallback;
  auto url = SplitUrl(*text);
  if (!url || (!url->rest.empty() && url->rest != "/")) {
    return Status::InvalidArgument(
        fmt::format("{} '{}' is not a base URL like {}", params.Label(key), Printable(*text, 100), fallback));
  }
  return url->Base();
}

// A string member of an object, "" when absent or of another type.
std::string Text(const json& object, const char* field) {
  if (!object.is_object()) return "";
  auto it = object.find(field);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

const json& Field(const json& object, const char* field) {
  static const json kNull;
  if (!object.is_object()) return kNull;
  auto it = object.find(field);
  return it == object.end() ? kNull : *it;
}

// An ARM list answer: the document and its "value" array; Unavailable naming `what` otherwise.
Result<json> ListOf(const std::string& text, const std::string& what) {
  auto doc = ParseForeignJson(text);
  if (!doc.ok() || !doc->is_object() || !Field(*doc, "value").is_array()) {
    return cloud::NotThe(fmt::format("ARM's list of {} ({{\"value\": [...]}})", what), text);
  }
  if (!Field(*doc, "nextLink").is_null() && !Field(*doc, "nextLink").is_string()) {
    return Status::Unavailable(fmt::format("the list of {} has a nextLink that is not a string", what));
  }
  return std::move(*doc);
}

std::string LastSegment(const std::string& id) { return id.substr(id.rfind('/') + 1); }

}  // namespace

namespace {

// The keys, once: what TakeOptions reads by, what --help-provider azure prints.
const ProviderKeys& Keys() {
  static const ProviderKeys kKeys = cloud::WithCommonKeys(
      {
          {.name = "resource_group", .help = "with vm_scale_set: the scale set's resource group",
           .values = "a resource group name"},
          {.name = "vm_scale_set", .help = "the scale set of the etcd VMs; auto: this VM's (IMDS)",
           .values = "auto or a scale set's name"},
          {.name = "tag_name", .help = "instead of a scale set: NICs carrying this tag (no size, no rule 9)"},
          {.name = "tag_value", .help = "with tag_name: the tag's value"},
          {.name = "subscription_id", .help = "the subscription; else ARM_SUBSCRIPTION_ID, else this VM's (auto)"},
          {.name = "tenant_id", .help = "a service principal's tenant; else AZURE_TENANT_ID, ARM_TENANT_ID"},
          {.name = "client_id",
           .help = "a service principal's client ID, or a user-assigned identity's; else AZURE_CLIENT_ID, ARM_CLIENT_ID"},
          {.name = "secret_access_key", .help = "a service principal's client secret; else AZURE_CLIENT_SECRET, "
                                                "ARM_CLIENT_SECRET, else workload or managed identity"},
          {.name = "environment", .help = "the cloud: its ARM, identity platform and token resource",
           .fallback = "public", .choices = {"public", "usgovernment", "china"}},
          {.name = "endpoint", .help = "ARM's base URL; default the environment's", .values = "a base URL"},
          {.name = "authority_host",
           .help = "the identity platform's base URL; else AZURE_AUTHORITY_HOST, else the environment's",
           .values = "a base URL"},
          {.name = "imds_endpoint", .help = "IMDS's base URL (managed identity, vm_scale_set=auto)",
           .fallback = "http://169.254.169.254:80", .values = "a base URL"},
          {.name = "ca_file", .help = "the CA bundle ARM and the identity platform chain to; default the system's",
           .values = "a file"},
          // A public address is a resource of its own that the NIC only points at: another call per VM.
          {.name = "addr_type", .help = "the primary NIC's primary private IPv4 address", .fallback = "private_v4",
           .choices = {"private_v4"}},
      },
      "the NIC tag naming the member; default the VM's computer name (a scale set's) or name");
  return kKeys;
}

}  // namespace

Result<Options> TakeOptions(ProviderParams& params) {
  Options o;
  o.tenant_id = params.Take("tenant_id").value_or("");
  o.client_id = params.Take("client_id").value_or("");
  o.subscription_id = params.Take("subscription_id").value_or("");
  o.secret = params.Take("secret_access_key").value_or("");
  o.tag_name = params.Take("tag_name").value_or("");
  o.tag_value = params.Take("tag_value").value_or("");
  o.resource_group = params.Take("resource_group").value_or("");
  o.vm_scale_set = params.Take("vm_scale_set").value_or("");
  o.ca_file = params.Take("ca_file").value_or("");
  auto common = cloud::TakeCommonKeys(params);
  if (!common.ok()) return common.status();
  static_cast<cloud::CommonKeys&>(o) = std::move(*common);
  if (auto addr_type = params.TakeValue("addr_type"); !addr_type.ok()) return addr_type.status();
  auto environment = params.TakeValue("environment");
  if (!environment.ok()) return environment.status();
  const cloud::AzureCloud* cloud = cloud::AzureCloudNamed(*environment);
  assert(cloud != nullptr && "environment's choices are the clouds AzureCloudNamed knows");
  o.endpoint = cloud->arm_endpoint;
  o.authority_host = cloud->authority_host;
  o.arm_resource = cloud->arm_resource;
  auto endpoint = BaseUrl(params, "endpoint", o.endpoint);
  if (!endpoint.ok()) return endpoint.status();
  // AZURE_AUTHORITY_HOST, as AKS's workload identity sets it, when the key leaves it out.
  const bool authority_from_env = !params.Take("authority_host").has_value() && !Env("AZURE_AUTHORITY_HOST").empty();
  auto authority = BaseUrl(params, "authority_host", o.authority_host);
  if (!authority.ok()) return authority.status();
  auto imds = BaseUrl(params, "imds_endpoint", o.imds_endpoint);
  if (!imds.ok()) return imds.status();
  o.endpoint = *endpoint;
  o.authority_host = *authority;
  o.imds_endpoint = *imds;
  if (Status s = params.CheckAllTaken(); !s.ok()) return s;
  const bool tags = !o.tag_name.empty() || !o.tag_value.empty();
  const bool scale_set = !o.resource_group.empty() || !o.vm_scale_set.empty();
  if (tags && scale_set) {
    return Status::InvalidArgument(
        "provider=azure takes either tag_name + tag_value or resource_group + vm_scale_set, not both: drop one pair");
  }
  if (!tags && !scale_set) {
    return Status::InvalidArgument(
        "provider=azure needs resource_group=... vm_scale_set=... (the etcd scale set; vm_scale_set=auto for this "
        "VM's own) or tag_name=... tag_value=... (a tag on the etcd VMs' network interfaces)");
  }
  if (tags && (o.tag_name.empty() || o.tag_value.empty())) {
    return Status::InvalidArgument(fmt::format("{} needs {} too", o.tag_name.empty() ? "tag_value" : "tag_name",
                                               o.tag_name.empty() ? "tag_name" : "tag_value"));
  }
  if (o.vm_scale_set == "auto") {
    if (!o.resource_group.empty()) {
      return Status::InvalidArgument(
          "vm_scale_set=auto reads the resource group from the instance metadata too: drop resource_group, or name "
          "the scale set");
    }
  } else if (scale_set && (o.resource_group.empty() || o.vm_scale_set.empty())) {
    return Status::InvalidArgument(fmt::format("{} needs {} too (or vm_scale_set=auto for this VM's own scale set)",
                                               o.resource_group.empty() ? "vm_scale_set" : "resource_group",
                                               o.resource_group.empty() ? "resource_group" : "vm_scale_set"));
  } else if (scale_set && !IsResourceGroup(o.resource_group)) {
    return Status::InvalidArgument(fmt::format("{} '{}' is not a resource group name (letters, digits, . _ - ( ))",
                                               params.Label("resource_group"), Printable(o.resource_group, 100)));
  } else if (scale_set && !IsScaleSetName(o.vm_scale_set)) {
    return Status::InvalidArgument(fmt::format("{} '{}' is not a scale set name (letters, digits, . _ -)",
                                               params.Label("vm_scale_set"), Printable(o.vm_scale_set, 100)));
  }
  // The credentials: the keys, else the environment as Azure's SDKs and go-discover read it.
  auto credentials = cloud::AzureTokenSource::Create(
      {o.tenant_id, o.client_id, o.secret, authority_from_env ? "" : o.authority_host, o.imds_endpoint, o.ca_file,
       nullptr},
      o.arm_resource);
  if (!credentials.ok()) return credentials.status();
  o.credentials = std::move(*credentials);
  o.authority_host = o.credentials->authority_host();
  if (o.subscription_id.empty()) o.subscription_id = Env("ARM_SUBSCRIPTION_ID");
  if (o.subscription_id.empty() && o.vm_scale_set != "auto") {
    return Status::InvalidArgument(
        "provider=azure needs subscription_id=... (or ARM_SUBSCRIPTION_ID); only vm_scale_set=auto reads it from the "
        "instance metadata");
  }
  if (!o.subscription_id.empty() && !IsGuidOrDomain(o.subscription_id)) {
    return Status::InvalidArgument(
        fmt::format("subscription_id '{}' is not a subscription ID", Printable(o.subscription_id, 100)));
  }
  return o;
}

Result<NicPage> ParseNicList(const std::string& text) {
  auto doc = ListOf(text, "network interfaces");
  if (!doc.ok()) return doc.status();
  NicPage page;
  for (const json& item : Field(*doc, "value")) {
    Nic nic;
    nic.id = Text(item, "id");
    if (nic.id.empty()) return Status::Unavailable("the list of network interfaces has one without an id");
    const json& props = Field(item, "properties");
    nic.vm_id = Text(Field(props, "virtualMachine"), "id");
    nic.primary = Field(props, "primary").is_boolean() && Field(props, "primary").get<bool>();
    const json& configs = Field(props, "ipConfigurations");
    if (configs.is_array()) {
      // The primary configuration's address; a NIC with one configuration may not mark it primary.
      for (const json& config : configs) {
        const json& c = Field(config, "properties");
        const std::string ip = Text(c, "privateIPAddress");
        const bool primary = Field(c, "primary").is_boolean() && Field(c, "primary").get<bool>();
        if (ip.empty() || Lower(Text(c, "privateIPAddressVersion")) == "ipv6") continue;
        if (primary || nic.private_ip.empty()) nic.private_ip = ip;
        if (primary) break;
      }
    }
    const json& tags = Field(item, "tags");
    if (tags.is_object()) {
      for (const auto& [k, v] : tags.items()) {
        if (v.is_string()) nic.tags[k] = v.get<std::string>();
      }
    }
    page.nics.push_back(std::move(nic));
  }
  page.next_link = Text(*doc, "nextLink");
  return page;
}

Result<VmPage> ParseScaleSetVms(const std::string& text) {
  auto doc = ListOf(text, "scale set instances");
  if (!doc.ok()) return doc.status();
  VmPage page;
  for (const json& item : Field(*doc, "value")) {
    ScaleSetVm vm;
    vm.id = Text(item, "id");
    if (vm.id.empty()) return Status::Unavailable("the list of scale set instances has one without an id");
    vm.name = Text(item, "name");
    const json& props = Field(item, "properties");
    vm.computer_name = Text(Field(props, "osProfile"), "computerName");
    if (vm.computer_name.empty()) vm.computer_name = Text(Field(props, "instanceView"), "computerName");
    vm.provisioning_state = Text(props, "provisioningState");
    const json& statuses = Field(Field(props, "instanceView"), "statuses");
    if (statuses.is_array()) {
      for (const json& status : statuses) {
        const std::string code = Text(status, "code");
        if (code.rfind("PowerState/", 0) == 0) vm.power_state = code.substr(11);
      }
    }
    page.vms.push_back(std::move(vm));
  }
  page.next_link = Text(*doc, "nextLink");
  return page;
}

Result<ScaleSet> ParseScaleSet(const std::string& text) {
  auto doc = ParseForeignJson(text);
  if (!doc.ok() || !doc->is_object()) {
    return cloud::NotThe("ARM's scale set resource (JSON)", text);
  }
  const json& capacity = Field(Field(*doc, "sku"), "capacity");
  if (!capacity.is_number_integer()) {
    return Status::Unavailable(
        fmt::format("the scale set resource has sku.capacity {}, not a count", Printable(capacity.dump(), 32)));
  }
  if (Status s = cloud::CheckGroupSize(capacity.get<int64_t>(), "the scale set"); !s.ok()) return s;
  const std::string mode = Lower(Text(Field(*doc, "properties"), "orchestrationMode"));
  // Sets made before Flexible existed have no orchestrationMode: they are Uniform.
  if (!mode.empty() && mode != "uniform" && mode != "flexible") {
    return Status::Unavailable(
        fmt::format("the scale set's orchestrationMode is '{}', not Uniform or Flexible", Printable(mode, 32)));
  }
  return ScaleSet{static_cast<int>(capacity.get<int64_t>()), mode == "flexible"};
}

Result<InstanceMetadata> ParseInstanceMetadata(const std::string& text) {
  auto doc = ParseForeignJson(text);
  const json& compute = doc.ok() ? Field(*doc, "compute") : Field(json(), "compute");
  if (!compute.is_object()) {
    return cloud::NotThe("IMDS's instance metadata (JSON with compute)", text);
  }
  InstanceMetadata m{Text(compute, "subscriptionId"), Text(compute, "resourceGroupName"),
                     Text(compute, "vmScaleSetName")};
  if (!IsGuidOrDomain(m.subscription_id) || !IsResourceGroup(m.resource_group) ||
      (!m.vm_scale_set.empty() && !IsScaleSetName(m.vm_scale_set))) {
    return Status::Unavailable(fmt::format(
        "IMDS's instance metadata names subscription '{}', resource group '{}', scale set '{}': not Azure names",
        Printable(m.subscription_id, 64), Printable(m.resource_group, 100), Printable(m.vm_scale_set, 64)));
  }
  return m;
}

bool Counts(const ScaleSetVm& vm) {
  if (Lower(vm.provisioning_state) == "deleting") return false;
  const std::string power = Lower(vm.power_state);
  return power.empty() || power == "starting" || power == "running";
}

Result<std::vector<Member>> MembersOf(const Options& o, const std::vector<Nic>& nics,
                                      const std::vector<ScaleSetVm>* vms) {
  // Resource IDs are case-insensitive, and ARM does not always spell one the same way twice.
  std::map<std::string, const ScaleSetVm*> counted;
  if (vms) {
    for (const ScaleSetVm& vm : *vms) {
      if (Counts(vm)) counted[Lower(vm.id)] = &vm;
    }
  }
  std::map<std::string, const Nic*> chosen;  // a VM's primary NIC, else its first one with an address
  for (const Nic& nic : nics) {
    if (nic.vm_id.empty() || nic.private_ip.empty()) continue;
    if (vms && !counted.count(Lower(nic.vm_id))) continue;
    const Nic*& slot = chosen[Lower(nic.vm_id)];
    if (slot == nullptr || (nic.primary && !slot->primary)) slot = &nic;
  }
  std::vector<Member> members;
  for (const auto& [vm_id, nic] : chosen) {
    std::string name = LastSegment(nic->vm_id);
    if (vms) {
      const ScaleSetVm& vm = *counted.at(vm_id);
      name = !vm.computer_name.empty() ? vm.computer_name : !vm.name.empty() ? vm.name : name;
    }
    if (!o.name_tag.empty()) {
      auto tag = nic->tags.find(o.name_tag);
      if (tag != nic->tags.end() && !tag->second.empty()) name = tag->second;
    }
    const std::string what = "the VM " + Printable(nic->vm_id, 200) + " (network interface " + Printable(nic->id, 200) + ")";
    auto host = cloud::UnicastHost(nic->private_ip, cloud::Family::kV4, what);
    if (!host.ok()) return host.status();
    auto m = cloud::InstanceMember(name, *host, o, what);
    if (!m.ok()) return m.status();
    members.push_back(std::move(*m));
  }
  std::sort(members.begin(), members.end(), [](const Member& a, const Member& b) { return a.name < b.name; });
  if (Status s = cloud::CheckDistinct(members, "the VMs"); !s.ok()) return s;
  return members;
}

std::optional<std::string> NextTarget(const std::string& base, const std::string& listed, const std::string& link) {
  // Printable ASCII without spaces, as a URL is: a CR, LF or NUL would shape a request of its own.
  if (!cloud::CheckOpaque(link, kMaxTokenBytes, "nextLink").ok()) return std::nullopt;
  auto a = SplitUrl(base);
  auto b = SplitUrl(link);
  if (!a || !b || a->scheme != b->scheme || a->host != b->host || a->port != b->port) return std::nullopt;
  const std::string path = listed.substr(0, listed.find('?'));
  if (b->rest.compare(0, path.size(), path) != 0 || b->rest.size() == path.size() || b->rest[path.size()] != '?') {
    return std::nullopt;
  }
  return b->rest;
}

namespace {

class AzureProvider : public cloud::ScalingGroupProvider {
 public:
  AzureProvider(Options o, const ProviderContext& context) : o_(std::move(o)), deadline_(context.deadline) {
    api_.clock = context.clock;
    api_.deadline = deadline_;
    api_.read_error = cloud::ParseAzureError;
    api_.drop = [this] { o_.credentials->Drop(); };
    api_.refusal = "the identity needs {} (the Reader role on the resource group or subscription has it)";
    if (o_.ca_file.empty()) api_.untrusted_fix = "give ca_file= the CA bundle it chains to";
  }

  Result<std::vector<Member>> Discover() override {
    StartReading();
    if (o_.vm_scale_set == "auto") {
      if (Status s = ReadInstanceMetadata(); !s.ok()) return s;
    }
    // Once a Discover: its calls carry the same token, fetched again when near its expiry.
    auto token = o_.credentials->Token(deadline_);
    if (!token.ok()) return token.status().Prefixed(Describe());
    token_ = std::move(*token);
    if (!o_.scale_set()) {
      auto nics = ListNics(fmt::format("/subscriptions/{}/providers/Microsoft.Network/networkInterfaces?api-version={}",
                                       o_.subscription_id, kNetworkVersion),
                           "Microsoft.Network/networkInterfaces/read");
      if (!nics.ok()) return nics.status();
      std::vector<Nic> tagged;
      for (Nic& nic : *nics) {
        // Tag names are case-insensitive in Azure, their values are not.
        for (const auto& [k, v] : nic.tags) {
          if (Lower(k) == Lower(o_.tag_name) && v == o_.tag_value) {
            tagged.push_back(std::move(nic));
            break;
          }
        }
      }
      auto members = MembersOf(o_, tagged, nullptr);
      if (!members.ok()) return members.status();
      if (Status s = cloud::CheckMembers(*members, Describe()); !s.ok()) return s;
      return members;
    }
    const std::string set_path =
        fmt::format("/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Compute/virtualMachineScaleSets/{}",
                    o_.subscription_id, o_.resource_group, o_.vm_scale_set);
    auto answer = Call(fmt::format("{}?api-version={}", set_path, kComputeVersion),
                       "Microsoft.Compute/virtualMachineScaleSets/read");
    if (!answer.ok()) return answer.status();
    auto set = ParseScaleSet(*answer);
    if (!set.ok()) return set.status().Prefixed(Describe());
    // Uniform: the set's own lists. Flexible: its resource group's VMs filtered by the set (the only
    // filter ARM takes there, and the one that allows the instance view), and the group's NICs.
    const std::string group_path =
        fmt::format("/subscriptions/{}/resourceGroups/{}/providers", o_.subscription_id, o_.resource_group);
    const std::string vms_target =
        set->flexible
            ? fmt::format("{}/Microsoft.Compute/virtualMachines?api-version={}&$filter={}&$expand=instanceView",
                          group_path, kComputeVersion,
                          cloud::PercentEncode(fmt::format("virtualMachineScaleSet/id eq '{}'", set_path)))
            : fmt::format("{}/virtualMachines?$expand=instanceView&api-version={}", set_path, kComputeVersion);
    std::vector<ScaleSetVm> vms;
    Status listed = Pages(vms_target,
                          set->flexible ? "Microsoft.Compute/virtualMachines/read"
                                        : "Microsoft.Compute/virtualMachineScaleSets/virtualMachines/read",
                          [&](const std::string& body) -> Result<cloud::Page> {
                            auto page = ParseScaleSetVms(body);
                            if (!page.ok()) return page.status();
                            const size_t items = page->vms.size();
                            for (ScaleSetVm& vm : page->vms) vms.push_back(std::move(vm));
                            return cloud::Page{items, page->next_link};
                          });
    if (!listed.ok()) return listed;
    auto nics = set->flexible
                    ? ListNics(fmt::format("{}/Microsoft.Network/networkInterfaces?api-version={}", group_path,
                                           kNetworkVersion),
                               "Microsoft.Network/networkInterfaces/read")
                    : ListNics(fmt::format("{}/networkInterfaces?api-version={}", set_path, kScaleSetNicVersion),
                               "Microsoft.Compute/virtualMachineScaleSets/networkInterfaces/read");
    if (!nics.ok()) return nics.status();
    auto members = MembersOf(o_, *nics, &vms);
    if (!members.ok()) return members.status();
    if (Status s = cloud::CheckMembers(*members, Describe()); !s.ok()) return s;
    ReadWhole(static_cast<size_t>(set->capacity));
    return members;
  }


  std::string Describe() const override {
    if (!o_.scale_set()) {
      return fmt::format("azure network interfaces tagged {}={} in subscription {}", o_.tag_name, o_.tag_value,
                         o_.subscription_id);
    }
    if (o_.vm_scale_set == "auto") return "azure scale set of this VM (vm_scale_set=auto)";
    return fmt::format("azure scale set {} in resource group {}", o_.vm_scale_set, o_.resource_group);
  }

 private:
  // Every page of a list, `take` reading one (adding its items) and giving its nextLink.
  Status Pages(const std::string& first, const std::string& permission,
               const std::function<Result<cloud::Page>(const std::string&)>& take) {
    return cloud::ReadPages(Describe(), "nextLink", [&](const std::string& next) -> Result<cloud::Page> {
      auto body = Call(next.empty() ? first : next, permission);
      if (!body.ok()) return body.status();
      auto page = take(*body);
      if (!page.ok()) return page.status().Prefixed(Describe());
      if (page->next.empty()) return page;
      auto next_target = NextTarget(o_.endpoint, first, page->next);
      if (!next_target) {
        return Status::Unavailable(fmt::format("{}: a nextLink ({} bytes) leads away from {}{}: '{}'", Describe(),
                                               page->next.size(), o_.endpoint, first.substr(0, first.find('?')),
                                               Printable(page->next, 200)));
      }
      return cloud::Page{page->items, *next_target};
    });
  }

  Result<std::vector<Nic>> ListNics(const std::string& target, const std::string& permission) {
    std::vector<Nic> nics;
    Status s = Pages(target, permission, [&](const std::string& body) -> Result<cloud::Page> {
      auto page = ParseNicList(body);
      if (!page.ok()) return page.status();
      const size_t items = page->nics.size();
      for (Nic& nic : page->nics) nics.push_back(std::move(nic));
      return cloud::Page{items, page->next_link};
    });
    if (!s.ok()) return s;
    return nics;
  }

  // One GET at ARM with the bearer token; the body. Throttles (429, 503) are waited out within the
  // deadline; a refusal names the permission the call needs.
  Result<std::string> Call(const std::string& target, const std::string& permission) {
    HttpRequest request = Request(o_.endpoint, "GET", target);
    request.headers = {{"Accept", "application/json"}, {"Authorization", "Bearer " + token_}};
    return cloud::CallApi(api_, std::move(request), kMaxAnswerBytes,
                          {fmt::format("{}: GET {}{}", Describe(), o_.endpoint, Printable(target, 300)), permission});
  }

  HttpRequest Request(const std::string& base, const std::string& method, const std::string& target) const {
    HttpRequest request;
    request.base_url = base;
    request.method = method;
    request.target = target;
    if (base.rfind("https://", 0) == 0) request.tls.trusted_ca_file = o_.ca_file;
    return request;
  }

  // vm_scale_set=auto: this VM's scale set, resource group and (unless given) subscription, once.
  Status ReadInstanceMetadata() {
    HttpRequest request =
        Request(o_.imds_endpoint, "GET", fmt::format("/metadata/instance?api-version={}", kImdsInstanceVersion));
    request.headers = {{"Metadata", "true"}};
    auto body = cloud::CallApi(api_, std::move(request), 256 * 1024,
                               {fmt::format("vm_scale_set=auto: the instance metadata at {}", o_.imds_endpoint)});
    if (!body.ok()) return body.status();
    auto metadata = ParseInstanceMetadata(*body);
    if (!metadata.ok()) return metadata.status();
    if (metadata->vm_scale_set.empty()) {
      return Status::InvalidArgument(
          "vm_scale_set=auto: this VM is in no scale set (its instance metadata names none); give "
          "resource_group=... vm_scale_set=... or tag_name=... tag_value=...");
    }
    o_.vm_scale_set = metadata->vm_scale_set;
    o_.resource_group = metadata->resource_group;
    if (o_.subscription_id.empty()) o_.subscription_id = metadata->subscription_id;
    return Status::Ok();
  }

  Options o_;
  cloud::Api api_;
  std::string token_;  // this Discover's
  Clock::TimePoint deadline_;
};

Result<std::unique_ptr<DiscoveryProvider>> Create(ProviderParams& params) {
  auto options = TakeOptions(params);
  if (!options.ok()) return options.status();
  return std::unique_ptr<DiscoveryProvider>(new AzureProvider(std::move(*options), params.context()));
}

const RegisterProvider kRegistration("azure", Keys(), Create);

}  // namespace
}  // namespace quorate::azure
