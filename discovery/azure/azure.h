// The azure provider's logic without the network: its keys, the Azure Resource Manager (ARM) and
// token calls it makes, and how their JSON answers become members, checked. The provider ("azure"
// in the registry) sends these calls with a bearer token; the unit tests and the fuzz target run
// the parsers on text.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "quorate/member.h"
#include "quorate/provider.h"
#include "quorate/status.h"

namespace quorate::azure {

// go-discover's keys, plus the scale set from IMDS, the base URLs, the member name and the ports.
struct Options {
  // With `secret` a service principal's client secret (tenant_id and client_id needed); without,
  // the VM's managed identity from IMDS (`client_id` then picks a user-assigned one).
  std::string tenant_id, client_id, subscription_id, secret;
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

// Reads the keys, and for the credentials they leave out the environment as go-discover reads it
// (ARM_TENANT_ID, ARM_CLIENT_ID, ARM_SUBSCRIPTION_ID, ARM_CLIENT_SECRET). InvalidArgument naming
// the key at fault and the fix.
Result<Options> TakeOptions(ProviderParams& params);

// A bearer token for ARM and until when it holds.
struct Token {
  std::string access_token;
  std::chrono::system_clock::time_point expires;
};
// The token endpoint's answer (expires_in a number) or IMDS's (expires_in, expires_on as strings),
// `now` being when it was asked for; Unavailable when it is not one or lacks a part.
Result<Token> ParseToken(const std::string& json, std::chrono::system_clock::time_point now);

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

// ARM's {"error": {"code", "message"}} and the token endpoints' {"error", "error_description"}.
struct ApiError {
  std::string code, message;
};
ApiError ParseError(const std::string& json);

// A scale set's instance counts while it is being created or runs; one being deleted, stopping,
// stopped or deallocated does not.
bool Counts(const ScaleSetVm& vm);

// The members: one per VM, its primary NIC's primary private address (a NIC attached to no VM, or
// without an address yet, makes none). `vms` (scale sets) keeps only the NICs of instances that
// count and names them by computer name; without it a member is named after its VM. `name_tag` on
// the NIC overrides both. Sorted by name. Unavailable for a name or address etcd would refuse.
Result<std::vector<Member>> MembersOf(const Options& o, const std::vector<Nic>& nics,
                                      const std::vector<ScaleSetVm>* vms);

// The path and query of a nextLink, when it points at `base` (scheme://host:port) itself: the
// bearer token goes nowhere else. nullopt otherwise.
std::optional<std::string> SameOriginTarget(const std::string& base, const std::string& link);

}  // namespace quorate::azure
