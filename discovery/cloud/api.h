// One call of a cloud's API, as aws, gce and azure make theirs: sent within the kit's per-call
// timeout and the caller's --timeout, a throttle waited out on the Clock seam, and any other answer
// than a 2xx turned into a Status that quotes the cloud's own error code and message (escaped, cut)
// and, for a refusal, names the permission the call needs. Each provider describes its API once
// (Api) and names each call (ApiCall); nothing else of the call is written per cloud.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "net/cloud/request.h"
#include "quorate/clock.h"
#include "quorate/http.h"
#include "quorate/status.h"

namespace quorate::cloud {

// What differs from one cloud's API to another's.
struct Api {
  Clock* clock = nullptr;  // null: RealClock()
  Clock::TimePoint deadline = Clock::kNever;
  std::function<ApiError(const std::string& body)> read_error;
  // A "slow down" besides HTTP 429 and 503 (EC2's RequestLimitExceeded in a 400, Google's
  // rateLimitExceeded in a 403): waited out like them.
  std::function<bool(int status, const ApiError& error)> throttled;
  // Credentials refused besides HTTP 401 (AWS's ExpiredToken in a 400): `drop` is called for both,
  // so the next call fetches others.
  std::function<bool(int status, const ApiError& error)> expired;
  std::function<void()> drop;
  // What a refusal (401, 403) adds, "{}" standing for the permission the call needs: "the service
  // account needs {} on project p (roles/compute.viewer has it)".
  std::string refusal;
  // Set: a server whose certificate does not chain to the CA bundle is the operator's to fix (exit
  // 2), the message ending with this ("give ca_file= the CA bundle it chains to").
  std::string untrusted_fix;
};

// One call: what the messages call it, and what a refusal names.
struct ApiCall {
  std::string what{};        // "DescribeInstances of aws Auto Scaling group g at https://..."
  std::string permission{};  // "ec2:DescribeInstances"; empty: no permission named
  std::string not_found{};   // what a 404 adds, when the call names something the operator gave
};

// Sends `request` (base, method, target, headers, body as the caller set them) with the kit's call
// timeout, `api.deadline` and a cap of `max_body` bytes; `sign` prepares each try (a signature that
// carries its time). The body of a 2xx answer; Unavailable otherwise, retried by the caller within
// --timeout: a throttle still there at the deadline, an error answer, or no answer at all.
Result<std::string> CallApi(const Api& api, HttpRequest request, size_t max_body, const ApiCall& call,
                            const std::function<void(HttpRequest&)>& sign = {});

}  // namespace quorate::cloud
