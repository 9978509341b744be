// Finding the external programs a test drives (etcd, dnsmasq, node, s3rver), so that a test whose
// program is missing can say so and skip.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <string>

namespace quorate {

// The executable `name` in the first directory of PATH, then of `more_dirs` (colon-separated), that
// has it; "" when none does.
inline std::string FindProgram(const std::string& name, const std::string& more_dirs = "") {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(std::string(path ? path : "") + ":" + more_dirs);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    std::string candidate = dir + "/" + name;
    if (!dir.empty() && access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

}  // namespace quorate
