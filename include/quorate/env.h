// The process environment, read where the operator's credentials and overrides come from (the
// cloud SDKs' variables, S3's keys, the Kubernetes service account).
#pragma once

#include <string>

namespace quorate {

// The variable's value, or "" when it is not set: the SDKs treat a set but empty variable as unset.
std::string Env(const char* name);

}  // namespace quorate
