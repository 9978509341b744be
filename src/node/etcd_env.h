// The environment etcd runs with under `quorate run` (docs/DESIGN.md §5): the ETCD_* variables the operator
// set for etcd and the basics a Go program needs, nothing else of quorate's, so no cloud or API
// credential given to quorate reaches etcd; and none of the ETCD_* variables that would fight the
// flags quorate computed (etcd refuses --initial-cluster beside ETCD_DISCOVERY, and ignores every
// flag when ETCD_CONFIG_FILE is set).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace quorate {

struct EtcdEnvironment {
  std::vector<std::pair<std::string, std::string>> env;
  // The ETCD_* variables of quorate's environment etcd does not get, sorted.
  std::vector<std::string> dropped;
};

// From `parent` ("NAME=value" entries, as in environ) for etcd started with `argv`.
EtcdEnvironment SelectEtcdEnvironment(const std::vector<std::string>& argv, const std::vector<std::string>& parent);

// Only the process basics of quorate's environment (PATH, HOME, locale, Go's runtime settings),
// and etcd 3.4's ETCD_UNSUPPORTED_ARCH without which it refuses some architectures: for an etcd
// quorate starts for itself (recover's, on a copy), which no other ETCD_* variable of the operator's
// may reach, since one could make it listen beyond loopback or read another config.
std::vector<std::pair<std::string, std::string>> ProcessBasicsEnvironment();

// The same from quorate's own environment, with one log line naming what was dropped, if anything.
std::vector<std::pair<std::string, std::string>> EtcdEnvironmentFor(const std::vector<std::string>& argv);

}  // namespace quorate
