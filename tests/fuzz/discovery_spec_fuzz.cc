// The --discovery spec string and the --initial-cluster list: what the operator types, parsed
// before anything else runs.
#include "fuzz.h"
#include "quorate/member.h"
#include "quorate/provider.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace quorate;
  std::string_view in = fuzz::Text(data, size);
  auto spec = ParseDiscoverySpec(in);
  fuzz::CheckMessage(spec.status());
  auto members = ParseInitialCluster(in, "--initial-cluster");
  fuzz::CheckMessage(members.status());
  if (members.ok()) {
    for (const auto& m : *members) {
      if (!CheckMemberName(m.name, "name").ok()) std::abort();  // only names etcd could carry get through
      for (const auto& u : m.peer_urls) {
        if (!ParseUrl(u).ok()) std::abort();
      }
    }
  }
  auto url = ParseUrl(in);
  fuzz::CheckMessage(url.status());
  if (url.ok() && !IsPrintable(url->text)) std::abort();
  return 0;
}
