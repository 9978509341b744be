#include "gce.h"

#include <cctype>
#include <memory>
#include <set>

#include <fmt/format.h>
#include <re2/re2.h>

#include "discovery/cloud/api.h"
#include "discovery/cloud/cloud.h"
#include "net/cloud/opaque.h"

#include "net/cloud/google_credentials.h"
#include "quorate/clock.h"
#include "quorate/env.h"
#include "quorate/http.h"
#include "quorate/json.h"
#include "net/cloud/request.h"
#include "quorate/text.h"

namespace quorate::gce {
namespace {

// A page of 500 instances with their metadata (startup scripts included) stays well under this.
constexpr size_t kMaxAnswerBytes = 32 << 20;
constexpr size_t kMaxSmallAnswerBytes = 64 * 1024;

// zone_pattern as RE2 reads it (linear time in the zone's length, whatever the pattern), anchored at
// both ends as the documented "regular expression on the zone name" is matched whole.
std::unique_ptr<RE2> ZonePattern(const std::string& pattern) {
  RE2::Options options;
  options.set_log_errors(false);
  return std::make_unique<RE2>(pattern, options);
}

// A name Google allows for a zone, region, group or project: lower-case letters, digits, '-' (and
// ':' and '.' for domain-scoped projects). Anything else in a path would be our own injection.
bool IsResourceName(const std::string& text) {
  return !text.empty() && text.size() <= 100 &&
         text.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-.:") == std::string::npos;
}

// Labels and tags are lower-case letters, digits, '-' and '_' (label values may be empty).
bool IsLabelText(const std::string& text) {
  return text.size() <= 63 && text.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-_") == std::string::npos;
}

std::string Text(const nlohmann::json& object, const char* field) {
  auto it = object.find(field);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string LastSegment(const std::string& url) { return url.substr(url.rfind('/') + 1); }

}  // namespace

Result<InstancePage> ParseAggregatedInstances(const std::string& json) {
  auto doc = ParseForeignJson(json);
  if (!doc.ok() || !doc->is_object() || (doc->contains("kind") && Text(*doc, "kind") != "compute#instanceAggregatedList")) {
    return cloud::NotThe("Compute Engine's instanceAggregatedList JSON", json);
  }
  InstancePage page;
  if (auto items = doc->find("items"); items != doc->end()) {
    if (!items->is_object()) return Status::Unavailable("aggregated/instances' items is not an object of scopes");
    for (const auto& [scope, scoped] : items->items()) {
      if (!scoped.is_object()) return Status::Unavailable("aggregated/instances' items holds a scope that is not an object");
      auto instances = scoped.find("instances");
      if (instances == scoped.end()) continue;  // a warning (NO_RESULTS_ON_PAGE) instead
      if (!instances->is_array()) return Status::Unavailable("aggregated/instances' instances is not a list");
      for (const auto& item : *instances) {
        if (!item.is_object()) return Status::Unavailable("aggregated/instances lists an instance that is not an object");
        Instance i;
        i.name = Text(item, "name");
        if (i.name.empty()) return Status::Unavailable("aggregated/instances lists an instance without a name");
        i.status = Text(item, "status");
        i.zone = LastSegment(Text(item, "zone"));
        if (i.zone.empty() && scope.rfind("zones/", 0) == 0) i.zone = scope.substr(6);
        auto nics = item.find("networkInterfaces");
        if (nics != item.end() && nics->is_array() && !nics->empty() && (*nics)[0].is_object()) {
          const auto& nic = (*nics)[0];
          i.network_ip = Text(nic, "networkIP");
          auto configs = nic.find("accessConfigs");
          if (configs != nic.end() && configs->is_array() && !configs->empty() && (*configs)[0].is_object()) {
            i.nat_ip = Text((*configs)[0], "natIP");
          }
        }
        if (auto labels = item.find("labels"); labels != item.end() && labels->is_object()) {
          for (const auto& [k, v] : labels->items()) {
            if (v.is_string()) i.labels[k] = v.get<std::string>();
          }
        }
        if (auto tags = item.find("tags"); tags != item.end() && tags->is_object()) {
          if (auto names = tags->find("items"); names != tags->end() && names->is_array()) {
            for (const auto& t : *names) {
              if (t.is_string()) i.tags.push_back(t.get<std::string>());
            }
          }
        }
        page.instances.push_back(std::move(i));
      }
    }
  }
  page.next_page_token = Text(*doc, "nextPageToken");
  if (auto unreachables = doc->find("unreachables"); unreachables != doc->end()) {
    if (!unreachables->is_array()) return Status::Unavailable("aggregated/instances' unreachables is not a list");
    for (const auto& scope : *unreachables) {
      page.unreachables.push_back(scope.is_string() ? scope.get<std::string>() : scope.dump());
    }
  }
  return page;
}

Result<Group> ParseInstanceGroupManager(const std::string& json) {
  auto doc = ParseForeignJson(json);
  if (!doc.ok() || !doc->is_object() ||
      (doc->contains("kind") && Text(*doc, "kind") != "compute#instanceGroupManager")) {
    return cloud::NotThe("Compute Engine's instanceGroupManager JSON", json);
  }
  Group group;
  group.name = Text(*doc, "name");
  auto size = doc->find("targetSize");
  if (size == doc->end() || !size->is_number_integer()) {
    return Status::Unavailable(fmt::format("instance group manager {} has targetSize '{}', not a count",
                                           Printable(group.name, 64), size == doc->end() ? "" : Printable(size->dump(), 16)));
  }
  if (Status s = cloud::CheckGroupSize(size->get<int64_t>(), "instance group manager " + Printable(group.name, 64));
      !s.ok()) {
    return s;
  }
  group.target_size = static_cast<int>(size->get<int64_t>());
  return group;
}

Result<GroupRef> ParseCreatedBy(const std::string& text) {
  // projects/P/{zones|regions}/L/instanceGroupManagers/N, possibly as a full URL.
  std::string path = text;
  if (size_t at = path.find("projects/"); at != std::string::npos) path = path.substr(at);
  std::vector<std::string> parts;
  for (size_t from = 0;;) {
    const size_t slash = path.find('/', from);
    parts.push_back(path.substr(from, slash - from));
    if (slash == std::string::npos) break;
    from = slash + 1;
  }
  if (parts.size() != 6 || parts[0] != "projects" || (parts[2] != "zones" && parts[2] != "regions") ||
      parts[4] != "instanceGroupManagers" || !IsResourceName(parts[1]) || !IsResourceName(parts[3]) ||
      !IsResourceName(parts[5])) {
    return Status::Unavailable(fmt::format("created-by '{}' does not name a managed instance group "
                                           "(projects/P/zones/Z/instanceGroupManagers/NAME)",
                                           Printable(text, 200)));
  }
  GroupRef ref;
  (parts[2] == "zones" ? ref.zone : ref.region) = parts[3];
  ref.name = parts[5];
  return ref;
}

bool Counts(const std::string& status) {
  return status == "PROVISIONING" || status == "STAGING" || status == "RUNNING";
}

Result<std::optional<Member>> MemberOf(const Options& o, const Instance& instance) {
  const std::string& given = o.addr_type == "public_v4" ? instance.nat_ip : instance.network_ip;
  if (given.empty()) return std::optional<Member>();
  const std::string what = "instance " + Printable(instance.name, 64);
  auto host = cloud::UnicastHost(given, cloud::Family::kV4, what);
  if (!host.ok()) return host.status();
  std::string name = instance.name;
  if (!o.name_tag.empty()) {
    auto label = instance.labels.find(o.name_tag);
    if (label != instance.labels.end() && !label->second.empty()) name = label->second;
  }
  auto member = cloud::InstanceMember(name, *host, o, what);
  if (!member.ok()) return member.status();
  return std::optional<Member>(std::move(*member));
}

std::string InstancesFilter(const Options& o) {
  // Labels only: the API documents its filter on a field or a nested one (labels.KEY), not on a list
  // such as tags.items, so a network tag is matched here, on the instances listed (as go-discover
  // does), rather than trusted to a filter form the API may refuse or read otherwise.
  if (o.label_key.empty()) return "";
  return o.label_value.empty() ? fmt::format("labels.{}:*", o.label_key)
                               : fmt::format("labels.{} = \"{}\"", o.label_key, o.label_value);
}

std::string AggregatedInstancesTarget(const Options& o, const std::string& page_token) {
  std::string target = fmt::format("/compute/v1/projects/{}/aggregated/instances?maxResults={}&returnPartialSuccess=true",
                                   o.project, o.page_size);
  if (const std::string filter = InstancesFilter(o); !filter.empty()) target += "&filter=" + cloud::PercentEncode(filter);
  if (!page_token.empty()) target += "&pageToken=" + cloud::PercentEncode(page_token);
  return target;
}

std::string ManagedInstancesTarget(const std::string& project, const GroupRef& group, const std::string& page_token) {
  std::string target = GroupTarget(project, group) + "/listManagedInstances?maxResults=500";
  if (!page_token.empty()) target += "&pageToken=" + cloud::PercentEncode(page_token);
  return target;
}

Result<ManagedPage> ParseManagedInstances(const std::string& json) {
  auto doc = ParseForeignJson(json);
  if (!doc.ok() || !doc->is_object()) {
    return cloud::NotThe("Compute Engine's listManagedInstances JSON", json);
  }
  ManagedPage page;
  if (auto list = doc->find("managedInstances"); list != doc->end()) {
    if (!list->is_array()) return Status::Unavailable("listManagedInstances' managedInstances is not a list");
    for (const auto& item : *list) {
      // .../zones/ZONE/instances/NAME
      const std::string url = item.is_object() ? Text(item, "instance") : "";
      const size_t instances = url.rfind("/instances/");
      const size_t zones = url.rfind("/zones/", instances);
      if (instances == std::string::npos || zones == std::string::npos) {
        return Status::Unavailable(fmt::format("listManagedInstances names an instance '{}' that is not a zone's",
                                               Printable(url, 200)));
      }
      page.instances.push_back({url.substr(zones + 7, instances - zones - 7) + "/" + url.substr(instances + 11),
                                Text(item, "currentAction")});
    }
  }
  page.next_page_token = Text(*doc, "nextPageToken");
  return page;
}

bool GroupCounts(const std::string& current_action) {
  static const std::set<std::string> kKept = {"NONE",       "CREATING",   "CREATING_WITHOUT_RETRIES", "VERIFYING",
                                              "REFRESHING", "RESTARTING", "STARTING",                 "RESUMING"};
  return kKept.count(current_action) > 0;
}

std::string GroupTarget(const std::string& project, const GroupRef& group) {
  return group.zone.empty()
             ? fmt::format("/compute/v1/projects/{}/regions/{}/instanceGroupManagers/{}", project, group.region, group.name)
             : fmt::format("/compute/v1/projects/{}/zones/{}/instanceGroupManagers/{}", project, group.zone, group.name);
}

bool ScopeMatters(const Options& o, const std::optional<GroupRef>& group, const std::string& scope) {
  // Instances live in zones; a scope of another kind is counted as one that may hold them.
  if (scope.rfind("zones/", 0) != 0) return true;
  const std::string zone = scope.substr(6);
  if (group) {
    if (!group->zone.empty()) return zone == group->zone;
    // A region's zones are named after it: us-central1-a in us-central1.
    return zone.rfind(group->region + "-", 0) == 0;
  }
  if (o.zone_pattern.empty()) return true;
  return IsResourceName(zone) && RE2::FullMatch(zone, *ZonePattern(o.zone_pattern));
}

namespace {

// The keys, once: what TakeOptions reads by, what --help-provider gce prints.
const ProviderKeys& Keys() {
  static const ProviderKeys kKeys = cloud::WithCommonKeys(
      {
          {.name = "mig", .help = "the managed instance group of the etcd instances; auto: this instance's",
           .values = "auto or a group's name"},
          {.name = "mig_zone", .help = "with mig=NAME: the zone of a zonal group", .values = "a zone name"},
          {.name = "mig_region", .help = "with mig=NAME: the region of a regional group", .values = "a region name"},
          {.name = "project_name", .help = "the project; else the key file's, else the metadata server's",
           .values = "a project ID"},
          {.name = "tag_value", .help = "instances carrying this network tag (instead of mig: no size, no rule 9)",
           .values = "a network tag"},
          {.name = "label_key", .help = "instances carrying this label (instead of mig)", .values = "a label key"},
          {.name = "label_value", .help = "with label_key: the label's value", .values = "a label value"},
          {.name = "zone_pattern", .help = "instances in the zones it matches whole (instead of mig)",
           .values = "an RE2 regular expression"},
          {.name = "addr_type", .help = "the first interface's address the members' URLs carry (networkIP, natIP)",
           .fallback = "private_v4", .choices = {"private_v4", "public_v4"}},
          {.name = "credentials_file", .help = "a service-account key or external-account file; else "
                                               "GOOGLE_APPLICATION_CREDENTIALS, else the metadata server",
           .values = "a file"},
          {.name = "endpoint", .help = "the Compute API's base URL", .fallback = "https://compute.googleapis.com",
           .values = "a base URL"},
          {.name = "metadata_endpoint",
           .help = "the metadata server's base URL; else http:// + GCE_METADATA_HOST, else the default",
           .fallback = "http://169.254.169.254", .values = "a base URL"},
          {.name = "page_size", .help = "aggregated/instances' maxResults", .fallback = "500", .lo = 1, .hi = 500,
           .values = "a page size"},
      },
      "the instance label naming the member; default the instance name");
  return kKeys;
}

}  // namespace

Result<Options> TakeOptions(ProviderParams& params) {
  Options o;
  o.project = params.Take("project_name").value_or("");
  o.zone_pattern = params.Take("zone_pattern").value_or("");
  o.tag_value = params.Take("tag_value").value_or("");
  o.label_key = params.Take("label_key").value_or("");
  const auto label_value = params.Take("label_value");
  o.label_value = label_value.value_or("");
  const std::string credentials = params.Take("credentials_file").value_or("");
  auto endpoint = params.TakeValue("endpoint");
  if (!endpoint.ok()) return endpoint.status();
  const std::string metadata = params.Take("metadata_endpoint").value_or("");
  o.mig = params.Take("mig").value_or("");
  o.mig_zone = params.Take("mig_zone").value_or("");
  o.mig_region = params.Take("mig_region").value_or("");
  auto addr_type = params.TakeValue("addr_type");
  if (!addr_type.ok()) return addr_type.status();
  o.addr_type = *addr_type;
  auto common = cloud::TakeCommonKeys(params);
  if (!common.ok()) return common.status();
  static_cast<cloud::CommonKeys&>(o) = std::move(*common);
  auto page_size = params.TakeNumber("page_size");
  if (!page_size.ok()) return page_size.status();
  o.page_size = *page_size;
  if (Status s = params.CheckAllTaken(); !s.ok()) return s;
  if (!o.project.empty() && !IsResourceName(o.project)) {
    return Status::InvalidArgument(fmt::format("{} '{}' is not a project ID (like my-project-123)",
                                               params.Label("project_name"), Printable(o.project, 64)));
  }
  if (o.mig.empty() && o.tag_value.empty() && o.label_key.empty()) {
    return Status::InvalidArgument(
        "provider=gce needs mig=auto|NAME (the managed instance group of the etcd instances), tag_value=TAG or "
        "label_key=KEY [label_value=VALUE]");
  }
  if (label_value && o.label_key.empty()) {
    return Status::InvalidArgument(fmt::format("{} needs label_key", params.Label("label_value")));
  }
  if (!IsLabelText(o.tag_value) || !IsLabelText(o.label_key) || !IsLabelText(o.label_value) ||
      (!o.label_key.empty() && !std::islower(static_cast<unsigned char>(o.label_key[0])))) {
    return Status::InvalidArgument(
        "tag_value, label_key and label_value are lower-case letters, digits, '-' and '_' (a label key starts with a "
        "letter), as Compute Engine allows them");
  }
  if (!o.zone_pattern.empty()) {
    if (auto pattern = ZonePattern(o.zone_pattern); !pattern->ok()) {
      return Status::InvalidArgument(fmt::format("{} '{}' is not a regular expression (RE2's syntax): {}",
                                                 params.Label("zone_pattern"), Printable(o.zone_pattern, 100),
                                                 Printable(pattern->error(), 200)));
    }
  }
  if (!o.mig.empty()) {
    if (!o.tag_value.empty() || !o.label_key.empty() || !o.zone_pattern.empty()) {
      return Status::InvalidArgument(
          "mig= lists the group's own instances; tag_value, label_key and zone_pattern would leave some out: give "
          "mig= alone, or the filters without it");
    }
    if (o.mig == "auto") {
      if (!o.mig_zone.empty() || !o.mig_region.empty()) {
        return Status::InvalidArgument("mig=auto reads the group's zone or region from the instance; drop mig_zone "
                                       "and mig_region, or name the group");
      }
    } else {
      if (!IsResourceName(o.mig)) {
        return Status::InvalidArgument(fmt::format("{} '{}' is not an instance group name",
                                                   params.Label("mig"), Printable(o.mig, 64)));
      }
      if (o.mig_zone.empty() == o.mig_region.empty()) {
        return Status::InvalidArgument(fmt::format(
            "mig={} needs where the group lives: mig_zone=ZONE (a zonal group) or mig_region=REGION (a regional one)",
            o.mig));
      }
      for (const auto& [key, value] : {std::pair{"mig_zone", o.mig_zone}, std::pair{"mig_region", o.mig_region}}) {
        if (!value.empty() && !IsResourceName(value)) {
          return Status::InvalidArgument(fmt::format("{} '{}' is not a zone or region name (like us-central1-a)",
                                                     params.Label(key), Printable(value, 64)));
        }
      }
    }
  } else if (!o.mig_zone.empty() || !o.mig_region.empty()) {
    return Status::InvalidArgument("mig_zone and mig_region go with mig=NAME");
  }
  auto base = cloud::GoogleBaseUrl(*endpoint);
  if (!base) {
    return Status::InvalidArgument(fmt::format("{} '{}' is not a base URL like http://127.0.0.1:8080",
                                               params.Label("endpoint"), Printable(*endpoint, 100)));
  }
  o.endpoint = *base;
  cloud::GoogleSettings settings;
  settings.credentials_file = credentials;
  settings.credentials_label = params.Label("credentials_file");
  if (!metadata.empty()) {
    auto base = cloud::GoogleBaseUrl(metadata);
    if (!base) {
      return Status::InvalidArgument(fmt::format("{} '{}' is not a base URL like http://169.254.169.254",
                                                 params.Label("metadata_endpoint"), Printable(metadata, 100)));
    }
    settings.metadata_endpoint = *base;
  }
  auto google = cloud::GoogleTokenSource::Create(settings);
  if (!google.ok()) return google.status();
  o.credentials = std::move(*google);
  if (o.project.empty() && IsResourceName(o.credentials->project_id())) o.project = o.credentials->project_id();
  return o;
}

namespace {

class GceProvider : public cloud::ScalingGroupProvider {
 public:
  GceProvider(Options o, const ProviderContext& context) : o_(std::move(o)), deadline_(context.deadline) {
    api_.clock = context.clock;
    api_.deadline = deadline_;
    api_.read_error = [](const std::string& body) {
      cloud::GoogleError e = cloud::ParseGoogleError(body);
      return cloud::ApiError{e.reason.empty() ? e.status : e.reason, e.message};
    };
    api_.throttled = [](int status, const cloud::ApiError& e) {
      return status == 403 && (e.code == "rateLimitExceeded" || e.code == "userRateLimitExceeded");
    };
    api_.drop = [this] { o_.credentials->Drop(); };
    if (!o_.mig.empty() && o_.mig != "auto") group_ = GroupRef{o_.mig_zone, o_.mig_region, o_.mig};
    if (!o_.zone_pattern.empty()) zones_ = ZonePattern(o_.zone_pattern);
  }

  Result<std::vector<Member>> Discover() override {
    StartReading();
    if (o_.project.empty()) {
      auto project = o_.credentials->Metadata("/computeMetadata/v1/project/project-id", deadline_);
      if (!project.ok()) return project.status().Prefixed("provider=gce has no project_name and cannot read it");
      if (!IsResourceName(*project)) {
        return Status::Unavailable(fmt::format("the metadata server's project-id '{}' is not a project ID",
                                               Printable(*project, 64)));
      }
      o_.project = *project;
    }
    // A project is a resource name: no brace in it to read as a format's.
    api_.refusal = fmt::format(
        "the service account needs {{}} on project {} (roles/compute.viewer has it), and a key still valid", o_.project);
    if (o_.mig == "auto" && !group_) {
      auto created_by = o_.credentials->Metadata("/computeMetadata/v1/instance/attributes/created-by", deadline_);
      if (!created_by.ok()) {
        return created_by.status().Prefixed("mig=auto reads the instance's created-by attribute, set only on an "
                                            "instance of a managed instance group");
      }
      auto ref = ParseCreatedBy(*created_by);
      if (!ref.ok()) return ref.status().Prefixed("mig=auto");
      group_ = *ref;
    }
    // Once a Discover: its calls carry the same token, fetched again when near its expiry.
    auto token = o_.credentials->Token(deadline_);
    if (!token.ok()) return token.status().Prefixed(Describe());
    token_ = std::move(*token);
    std::optional<Group> group;
    std::set<std::string> kept;  // the group's instances it keeps, "ZONE/NAME"
    if (group_) {
      auto answer = Get(GroupTarget(o_.project, *group_), kMaxSmallAnswerBytes,
                        {"instanceGroupManagers.get of " + Describe(), "compute.instanceGroupManagers.get",
                         "is the group's name, zone or region right?"});
      if (!answer.ok()) return answer.status();
      auto parsed = ParseInstanceGroupManager(*answer);
      if (!parsed.ok()) return parsed.status().Prefixed(Describe());
      group = *parsed;
      // The group's own view of its instances: the ones it keeps, by zone and name.
      Status listed = cloud::ReadPages("listManagedInstances", "nextPageToken",
                                       [&](const std::string& next) -> Result<cloud::Page> {
        auto answer = Get(ManagedInstancesTarget(o_.project, *group_, next), kMaxAnswerBytes,
                          {"listManagedInstances of " + Describe(), "compute.instanceGroupManagers.get"}, "POST");
        if (!answer.ok()) return answer.status();
        auto page = ParseManagedInstances(*answer);
        if (!page.ok()) return page.status().Prefixed(Describe());
        for (const ManagedInstance& i : page->instances) {
          if (GroupCounts(i.current_action)) kept.insert(i.zone_and_name);
        }
        return cloud::Page{page->instances.size(), page->next_page_token};
      });
      if (!listed.ok()) return listed;
    }
    std::vector<Member> members;
    Status read = cloud::ReadPages("aggregated/instances", "nextPageToken", [&](const std::string& next) -> Result<cloud::Page> {
      auto answer = Get(AggregatedInstancesTarget(o_, next), kMaxAnswerBytes,
                        {fmt::format("aggregated/instances of project {}", o_.project), "compute.instances.list"});
      if (!answer.ok()) return answer.status();
      auto page = ParseAggregatedInstances(*answer);
      if (!page.ok()) return page.status().Prefixed(Describe());
      for (const std::string& scope : page->unreachables) {
        // A partial answer: the instances of a zone that did not answer are unknown, not gone.
        if (ScopeMatters(o_, group_, scope)) {
          return Status::Unavailable(fmt::format("{}: aggregated/instances could not reach {}", Describe(),
                                                 Printable(scope, 100)));
        }
      }
      for (const Instance& i : page->instances) {
        if (!Counts(i.status)) continue;
        if (group_ && !kept.count(i.zone + "/" + i.name)) continue;
        if (zones_) {
          // Bounded before it is matched: a zone is a resource name, never kilobytes.
          if (!IsResourceName(i.zone)) {
            return Status::Unavailable(fmt::format("{}: instance {} has a zone of {} bytes that is not a zone name",
                                                   Describe(), Printable(i.name, 64), i.zone.size()));
          }
          if (!RE2::FullMatch(i.zone, *zones_)) continue;
        }
        if (!o_.tag_value.empty() && std::find(i.tags.begin(), i.tags.end(), o_.tag_value) == i.tags.end()) continue;
        auto member = MemberOf(o_, i);
        if (!member.ok()) return member.status();
        if (*member) members.push_back(std::move(**member));
      }
      return cloud::Page{page->instances.size(), page->next_page_token};
    });
    if (!read.ok()) return read;
    if (Status s = cloud::CheckMembers(members, Describe()); !s.ok()) return s;
    if (group) ReadWhole(static_cast<size_t>(group->target_size));
    return members;
  }

  std::string Describe() const override {
    std::string what;
    if (group_) {
      what = fmt::format("gce managed instance group {} in {}", group_->name,
                         group_->zone.empty() ? group_->region : group_->zone);
    } else if (o_.mig == "auto") {
      what = "gce managed instance group of this instance";
    } else {
      what = "gce instances";
      if (!o_.tag_value.empty()) what += " tagged " + o_.tag_value;
      if (!o_.label_key.empty()) {
        what += fmt::format(" labelled {}{}{}", o_.label_key, o_.label_value.empty() ? "" : "=", o_.label_value);
      }
      if (!o_.zone_pattern.empty()) what += " in zones " + Printable(o_.zone_pattern, 64);
    }
    return o_.project.empty() ? what : fmt::format("{} of project {}", what, o_.project);
  }

 private:
  // One Compute API call with the bearer token; the answer's body. Throttles (429, 503,
  // rateLimitExceeded) are waited out within the deadline; an error answer names the call and, for a
  // refusal, the permission it needs.
  Result<std::string> Get(const std::string& target, size_t max_body, const cloud::ApiCall& call,
                          const char* method = "GET") {
    HttpRequest request;
    request.base_url = o_.endpoint;
    request.method = method;
    request.target = target;
    request.headers = {{"Authorization", "Bearer " + token_}};
    return cloud::CallApi(api_, std::move(request), max_body,
                          {fmt::format("{} at {}", call.what, o_.endpoint), call.permission, call.not_found});
  }

  Options o_;
  cloud::Api api_;
  Clock::TimePoint deadline_;
  std::optional<GroupRef> group_;
  std::unique_ptr<RE2> zones_;
  std::string token_;  // this Discover's
};

Result<std::unique_ptr<DiscoveryProvider>> Create(ProviderParams& params) {
  auto options = TakeOptions(params);
  if (!options.ok()) return options.status();
  return std::unique_ptr<DiscoveryProvider>(new GceProvider(std::move(*options), params.context()));
}

const RegisterProvider kRegistration("gce", Keys(), Create);

}  // namespace
}  // namespace quorate::gce
