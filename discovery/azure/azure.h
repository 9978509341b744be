// The azure provider's logic without the network: its keys, the Azure Resource Manager (ARM) and
// token calls it makes, and how their JSON answers become members, checked. The provider ("azure"
// in the registry) sends these calls with a bearer token; the unit tests and the fuzz target run
// the parsers on text.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "net/cloud/azure_credentials.h"
#include "quorate/member.h"
#include "quorate/provider.h"
#include "quorate/status.h"

namespace quorate::azure {

// go-discover's keys, plus the scale set from IMDS, the base URLs, the member name and the ports.
struct Options {
  // The keys given; for what they leave out, the environment (src/net/cloud/azure_credentials.h):
  // a client secret, workload identity, else the VM's managed identity (`client_id` then picks a
  // user-assigned one).
  std::string tenant_id, client_id, subscription_id, secret;
  // The bearer tokens for `arm_resource`; TakeOptions sets it.
  std::shared_ptr<cloud::AzureTokenSource> credentials;
  // Either NICs tagged tag_name=tag_value anywhere in the subscription, or a scale set's.
  std::string tag_name, tag_value;
  std::string resource_group, vm_scale_set;  // vm_scale_set "auto": this VM's, read from IMDS
  // Base URLs, scheme://host:port with the port spelt out; TakeOptions defaults ARM's and the
  // authority's to `environment`'s.
  std::string endpoint;
  std::string authority_host;
  // What the token is asked for: the ARM of the cloud (`environment`), also when `endpoint` points
  // elsewhere (a private link, a test).
  std::string arm_resource;
  std::string imds_endpoint = "http://169.254.169.254:80";
  std::string ca_file;   // the CA bundle ARM and the authority must chain to; empty: the system's
  std::string name_tag;  // the NIC tag naming the member; empty: the VM's computer name or name
  std::string scheme = "http";
  int peer_port = 2380;
  int client_port = 2379;

  bool scale_set() const { return !vm_scale_set.empty(); }
};

// Reads the keys, and for what they leave out the environment as go-discover and Azure's SDKs read
// it (ARM_SUBSCRIPTION_ID; the credentials' AZURE_* and ARM_*). InvalidArgument naming the key at
// fault and the fix.
Result<Options> TakeOptions(ProviderParams& params);

// One network interface of a list answer, as far as the provider reads it.
struct Nic {
  std::string id;
  std::string vm_id;  // properties.virtualMachine.id; empty when attached to no VM
  bool primary = false;
  std::string private_ip;  // the primary IP configuration's privateIPAddress
  std::map<std::string, std::string> tags;
};
struct NicPage {
  std::vector<Nic> nics;
  std::string next_link;  // absolute URL; empty on the last page
};
// Unavailable when the answer is not ARM's {"value": [...]} list of NICs or a NIC lacks its id.
Result<NicPage> ParseNicList(const std::string& json);

// One instance of a scale set, from its virtualMachines list (Uniform) or its resource group's
// filtered by the set (Flexible), with the instance view.
struct ScaleSetVm {
  std::string id, name, computer_name;
  std::string provisioning_state;  // Creating, Updating, Succeeded, Failed, Deleting...
  std::string power_state;         // starting, running, stopping, stopped, deallocating...; empty: none yet
};
struct VmPage {
  std::vector<ScaleSetVm> vms;
  std::string next_link;
};
Result<VmPage> ParseScaleSetVms(const std::string& json);
// The scale set resource: its sku.capacity (the group's size) and its orchestration mode. A Uniform
// set lists its instances and their NICs under itself; a Flexible one's are plain VMs and NICs of
// its resource group, the VMs naming the set in virtualMachineScaleSet.id.
struct ScaleSet {
  int capacity = 0;
  bool flexible = false;
};
Result<ScaleSet> ParseScaleSet(const std::string& json);

// What IMDS's instance metadata tells about this VM.
struct InstanceMetadata {
  std::string subscription_id, resource_group, vm_scale_set;  // vm_scale_set empty: in none
};
Result<InstanceMetadata> ParseInstanceMetadata(const std::string& json);

// A scale set's instance counts while it is being created or runs; one being deleted, stopping,
// stopped or deallocated does not.
bool Counts(const ScaleSetVm& vm);

// The members: one per VM, its primary NIC's primary private address (a NIC attached to no VM, or
// without an address yet, makes none). `vms` (scale sets) keeps only the NICs of instances that
// count and names them by computer name; without it a member is named after its VM. `name_tag` on
// the NIC overrides both. Sorted by name. Unavailable for a name etcd would refuse or an address
// that is not a unicast IPv4 one.
Result<std::vector<Member>> MembersOf(const Options& o, const std::vector<Nic>& nics,
                                      const std::vector<ScaleSetVm>* vms);

// The path and query of a nextLink, when it points at `base` (scheme://host:port) itself and at the
// path of the list it continues (`listed`, the first page's target): the bearer token goes nowhere
// else. nullopt otherwise, and for a link with a space, a control byte or non-ASCII in it.
std::optional<std::string> NextTarget(const std::string& base, const std::string& listed, const std::string& link);

}  // namespace quorate::azure
