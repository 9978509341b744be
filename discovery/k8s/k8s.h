// The k8s provider's logic without the network: which API paths it asks for and how their answers
// (a PodList, an EndpointSliceList, a StatefulSet) become members, checked. The provider ("k8s" in the
// registry) runs this against the API server over HTTPS; the unit tests run it on JSON text.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "quorate/member.h"
#include "quorate/provider.h"
#include "quorate/status.h"

namespace quorate::k8s {

// Where a pod's service-account token, CA bundle and namespace are mounted, as client-go expects.
inline constexpr char kServiceAccountDir[] = "/var/run/secrets/kubernetes.io/serviceaccount";

struct Options {
  std::string api_server;  // https://host:port, IPv6 host in brackets
  std::string token_file;
  std::string ca_file;
  std::string namespace_name;
  std::string label_selector;  // empty: the Service's EndpointSlices instead of a pod list
  std::string service;         // the headless Service that gives the pods DNS names
  std::string port_name = "peer";
  std::string client_port_name = "client";
  std::string scheme = "http";
  std::string cluster_domain = "cluster.local";  // empty: host names end in .svc
  std::string statefulset;                       // empty: the pods' controller
  int page_size = 500;
  std::chrono::milliseconds timeout{10000};
};

// Reads the provider's keys and, for what they leave out, the in-cluster environment
// (KUBERNETES_SERVICE_HOST/PORT and the service-account files). InvalidArgument naming the key,
// variable or file at fault and the fix.
Result<Options> TakeOptions(ProviderParams& params);

// Query values as the API server reads them: everything but unreserved characters percent-encoded.
std::string QueryEscape(const std::string& text);
std::string PodListPath(const Options& o, const std::string& continue_token);
std::string EndpointSliceListPath(const Options& o, const std::string& continue_token);
std::string PodPath(const Options& o, const std::string& pod);
std::string StatefulSetPath(const Options& o, const std::string& statefulset);

// <scheme>://<dns_label>.<service>.<namespace>.svc[.<cluster domain>]:<port>, for both URLs.
Member MemberFor(const Options& o, const std::string& name, const std::string& dns_label, int peer_port,
                 int client_port);

// One page of a list, as members: pods being deleted and terminating endpoints are left out.
struct ListPage {
  std::vector<Member> members;
  std::vector<std::string> statefulsets;  // each listed pod's controlling StatefulSet, if any
  std::string next;                       // metadata.continue; empty on the last page
};
// Unavailable naming `source` (the request) when the answer is not the list it should be (not JSON,
// nested past 64 levels, another shape): what is fetched at run time is retried, never bad input.
Result<ListPage> ParsePodList(const Options& o, const std::string& body, const std::string& source);
Result<ListPage> ParseEndpointSliceList(const Options& o, const std::string& body, const std::string& source);
// A Pod's controlling StatefulSet; empty when none controls it.
Result<std::string> ParsePodController(const std::string& body, const std::string& source);
Result<size_t> ParseStatefulSetReplicas(const std::string& body, const std::string& source);

// The API server's refusal as one line for the operator: `call` says what was asked (verb,
// resource, API group), `status` the HTTP code and `body` its Status object. 403 names the RBAC
// rule to add, 404 of a namespace or StatefulSet the key to fix; a pod gone since a slice named it,
// 5xx and 429 are Unavailable (look again later), the rest InvalidArgument.
struct Call {
  std::string verb;      // list, get
  std::string resource;  // pods, endpointslices, statefulsets
  std::string group;     // "" for the core group
  std::string name;      // the object's name; empty for a list
  std::string path;      // with the query
};
Status Refusal(const Options& o, const Call& call, int status, const std::string& body);

}  // namespace quorate::k8s
