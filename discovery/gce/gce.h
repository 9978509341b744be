// The gce provider's logic without the network: its keys, the Compute Engine API requests it makes,
// and how the JSON answers become members, checked. The provider ("gce" in the registry) sends these
// requests with a bearer token from src/net/cloud/google_credentials.h; the unit tests and the fuzz
// target run the parsers on text.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "discovery/cloud/cloud.h"
#include "net/cloud/google_credentials.h"
#include "quorate/member.h"
#include "quorate/provider.h"
#include "quorate/status.h"

namespace quorate::gce {

// go-discover's keys, plus the managed instance group, the member name and the etcd ports.
// The keys every cloud shares (name_tag: the label naming the member, else the instance name; scheme,
// peer_port, client_port) come from cloud::CommonKeys.
struct Options : cloud::CommonKeys {
  std::string project;  // project_name; empty: the key file's project_id, else the metadata server's
  std::string zone_pattern;  // an anchored regular expression on the zone name; empty: every zone
  std::string tag_value;     // a network tag the instances carry
  std::string label_key, label_value;
  // The bearer tokens (credentials_file, else Application Default Credentials) and the metadata
  // server (metadata_endpoint, else http:// + GCE_METADATA_HOST, else http://169.254.169.254).
  std::shared_ptr<cloud::GoogleTokenSource> credentials;
  std::string endpoint;  // the Compute API's base URL (its table's default: https://compute.googleapis.com)
  // The managed instance group: "auto" (the instance's own created-by attribute), a name, or empty.
  std::string mig;
  std::string mig_zone, mig_region;  // where the named group lives (one of them)
  std::string addr_type = "private_v4";  // private_v4 (networkIP), public_v4 (accessConfigs' natIP)
  int page_size = 500;  // page_size: aggregated/instances' maxResults, 1-500
};

// Reads the keys and, for what they leave out, the environment as Google's libraries read it
// (GOOGLE_APPLICATION_CREDENTIALS, GCE_METADATA_HOST). The key file is read here: a file that is
// missing or not a service-account key is the operator's to fix. InvalidArgument naming the key.
Result<Options> TakeOptions(ProviderParams& params);

// One instance of an aggregated list, as far as the provider reads it.
struct Instance {
  std::string name, zone, status;
  std::string network_ip, nat_ip;  // networkInterfaces[0]'s, and its accessConfigs[0]'s
  std::map<std::string, std::string> labels;
  std::vector<std::string> tags;  // the network tags, tags.items
};
struct InstancePage {
  std::vector<Instance> instances;
  std::string next_page_token;            // empty on the last page
  std::vector<std::string> unreachables;  // scopes ("zones/us-east1-b") that did not answer
};
// Unavailable when the answer is not an instanceAggregatedList or an instance lacks its name.
Result<InstancePage> ParseAggregatedInstances(const std::string& json);

// A managed instance group, from instanceGroupManagers.get (or the regional one).
struct Group {
  std::string name;
  int target_size = 0;
};
Result<Group> ParseInstanceGroupManager(const std::string& json);

// Where a group lives and its name, as its instances' created-by attribute names it:
// projects/P/zones/Z/instanceGroupManagers/N or projects/P/regions/R/instanceGroupManagers/N.
struct GroupRef {
  std::string zone, region, name;  // zone or region
};
// Unavailable when the text is not such a path.
Result<GroupRef> ParseCreatedBy(const std::string& text);

// Provisioning, staging and running instances are the group's (one launched with the others has its
// address already); stopping, stopped, suspending, suspended, terminated and repairing ones are not.
bool Counts(const std::string& status);

// The member an instance stands for, its URLs from the address `addr_type` names; nullopt when the
// instance has no such address (yet). Unavailable for a name or address etcd would refuse.
Result<std::optional<Member>> MemberOf(const Options& o, const Instance& instance);

// The `filter` of aggregated/instances for the tag and label asked (empty: none).
std::string InstancesFilter(const Options& o);
// Path and query of one aggregated/instances page.
std::string AggregatedInstancesTarget(const Options& o, const std::string& page_token);
// Path of instanceGroupManagers.get (or regionInstanceGroupManagers.get) for the group.
std::string GroupTarget(const std::string& project, const GroupRef& group);
// Path and query of one page of the group's listManagedInstances (a POST).
std::string ManagedInstancesTarget(const std::string& project, const GroupRef& group, const std::string& page_token);

// The group's own view of its instances, one page of listManagedInstances: each as "ZONE/NAME" with
// the action the group is taking on it.
struct ManagedInstance {
  std::string zone_and_name, current_action;
};
struct ManagedPage {
  std::vector<ManagedInstance> instances;
  std::string next_page_token;
};
// Unavailable when the answer is not that list or an instance's URL names no zone and name.
Result<ManagedPage> ParseManagedInstances(const std::string& json);
// An instance the group keeps: no action, or being created, verified, refreshed, restarted,
// started or resumed; one it is abandoning, deleting, recreating (a new disk), stopping or suspending
// does not count, whatever its status.
bool GroupCounts(const std::string& current_action);

// A scope an unreachables list names could hold the instances asked for: the group's zone (or a zone
// of its region), a zone zone_pattern takes, or any zone when neither narrows the list.
bool ScopeMatters(const Options& o, const std::optional<GroupRef>& group, const std::string& scope);

}  // namespace quorate::gce
