// The Kubernetes API's answers: pod lists, EndpointSlice lists, a pod, a StatefulSet. The first
// byte picks the parser; deep nesting, huge numbers and wrong types must all end in a Status.
#include "../../discovery/k8s/k8s.h"
#include "fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace quorate;
  if (size == 0) return 0;
  std::string body(fuzz::Text(data + 1, size - 1));
  k8s::Options o;
  o.namespace_name = "etcd";
  o.service = "etcd";
  o.label_selector = data[0] & 1 ? "app=etcd" : "";
  const std::string source = "GET /api/v1/...";
  switch (data[0] % 4) {
    case 0: {
      auto page = k8s::ParsePodList(o, body, source);
      fuzz::CheckMessage(page.status());
      if (page.ok()) {
        for (const auto& m : page->members) {
          if (!CheckMemberName(m.name, "name").ok()) std::abort();
        }
      }
      break;
    }
    case 1: {
      auto page = k8s::ParseEndpointSliceList(o, body, source);
      fuzz::CheckMessage(page.status());
      if (page.ok()) {
        for (const auto& m : page->members) {
          if (!CheckMemberName(m.name, "name").ok()) std::abort();
        }
      }
      break;
    }
    case 2:
      fuzz::CheckMessage(k8s::ParsePodController(body, source).status());
      break;
    default:
      fuzz::CheckMessage(k8s::ParseStatefulSetReplicas(body, source).status());
  }
  return 0;
}
