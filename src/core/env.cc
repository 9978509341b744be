#include "quorate/env.h"

#include <cstdlib>

namespace quorate {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

}  // namespace quorate
