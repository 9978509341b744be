// An etcd peer URL's GET /members answer: the cluster ID header, a NUL, then the body. Whatever a
// peer sends, what is accepted holds only names and URLs that are safe in etcd's config files.
#include "etcd/peer_probe.h"
#include "fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace quorate;
  auto [header, body] = fuzz::Split(fuzz::Text(data, size));
  auto view = ParseMembersAnswer(body, header, "http://peer:2380/members");
  fuzz::CheckMessage(view.status());
  if (!view.ok()) return 0;
  for (const auto& m : view->members) {
    if (!CheckMemberName(m.name, "name").ok()) std::abort();
    for (const auto* urls : {&m.peer_urls, &m.client_urls}) {
      for (const auto& u : *urls) {
        if (!ParseUrl(u).ok() || !IsPrintable(u)) std::abort();
      }
    }
  }
  return 0;
}
