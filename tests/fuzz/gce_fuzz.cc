// Compute Engine's JSON answers (an aggregated instance list, an instance group manager, a token, an
// error) and the created-by attribute as any server or proxy on the way might send them: parsed
// without crashing, tokens whole or refused, sizes never negative, and every member made of an
// instance has a name and URLs etcd accepts.
#include "../../discovery/gce/gce.h"
#include "fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace quorate;
  const std::string json(fuzz::Text(data, size));
  cloud::ParseGoogleError(json);
  auto token = cloud::ParseGoogleToken(json);
  fuzz::CheckMessage(token.status());
  if (token.ok() && (token->access_token.empty() || token->expires_in.count() <= 0)) std::abort();
  auto group = gce::ParseInstanceGroupManager(json);
  fuzz::CheckMessage(group.status());
  if (group.ok() && group->target_size < 0) std::abort();
  auto ref = gce::ParseCreatedBy(json);
  fuzz::CheckMessage(ref.status());
  if (ref.ok() && (ref->name.empty() || ref->zone.empty() == ref->region.empty())) std::abort();
  auto page = gce::ParseAggregatedInstances(json);
  fuzz::CheckMessage(page.status());
  if (!page.ok()) return 0;
  for (const char* addr : {"private_v4", "public_v4"}) {
    gce::Options o;
    o.addr_type = addr;
    o.name_tag = "member";
    for (const auto& instance : page->instances) {
      gce::CreatedBy(instance, {"us-central1-a", "", "etcd"});
      auto member = gce::MemberOf(o, instance);
      fuzz::CheckMessage(member.status());
      if (!member.ok() || !*member) continue;
      if (!CheckMemberName((*member)->name, "fuzz").ok() || !ParseUrl((*member)->peer_urls[0]).ok() ||
          !ParseUrl((*member)->client_urls[0]).ok()) {
        std::abort();
      }
    }
  }
  return 0;
}
