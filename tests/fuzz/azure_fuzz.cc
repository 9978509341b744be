// ARM's, the token endpoints' and IMDS's JSON answers as any server or proxy on the way might send
// them: parsed without crashing, tokens whole or refused, and every member made of the NICs (with
// and without the scale set's instances) has a name and URLs etcd accepts.
#include "../../discovery/azure/azure.h"
#include "fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace quorate;
  const std::string text(fuzz::Text(data, size));
  cloud::ParseAzureError(text);
  auto token = cloud::ParseAzureToken(text, std::chrono::system_clock::now());
  fuzz::CheckMessage(token.status());
  if (token.ok() && token->access_token.empty()) std::abort();
  auto set = azure::ParseScaleSet(text);
  fuzz::CheckMessage(set.status());
  if (set.ok() && set->capacity < 0) std::abort();
  auto imds = azure::ParseInstanceMetadata(text);
  fuzz::CheckMessage(imds.status());
  if (imds.ok() && (imds->subscription_id.empty() || imds->resource_group.empty())) std::abort();
  auto link = azure::NextTarget("https://management.azure.com:443", "/subscriptions/s/x?api-version=1", text);
  if (link && link->rfind("/subscriptions/s/x?", 0) != 0) std::abort();
  auto vms = azure::ParseScaleSetVms(text);
  fuzz::CheckMessage(vms.status());
  auto page = azure::ParseNicList(text);
  fuzz::CheckMessage(page.status());
  if (!page.ok()) return 0;
  azure::Options o;
  o.name_tag = "name";
  using Vms = const std::vector<azure::ScaleSetVm>*;
  for (Vms set : {Vms(nullptr), vms.ok() ? Vms(&vms->vms) : Vms(nullptr)}) {
    auto members = azure::MembersOf(o, page->nics, set);
    fuzz::CheckMessage(members.status());
    if (!members.ok()) continue;
    for (const Member& m : *members) {
      if (!CheckMemberName(m.name, "fuzz").ok() || !ParseUrl(m.peer_urls[0]).ok() || !ParseUrl(m.client_urls[0]).ok()) {
        std::abort();
      }
    }
  }
  return 0;
}
