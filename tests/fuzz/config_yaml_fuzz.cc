// The YAML --config file: what the operator wrote, read with every option of `quorate run`. Lists
// and maps where a value belongs, aliases, anchors and deep nesting must all end in a Status.
#include <unistd.h>

#include <cstdio>
#include <string>

#include "fuzz.h"
#include "cli/options.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace quorate;
  static const std::string path = [] {
    char tmpl[] = "/tmp/quorate-fuzz-config-XXXXXX";
    int fd = mkstemp(tmpl);
    if (fd >= 0) close(fd);
    return std::string(tmpl);
  }();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  std::vector<std::string> keys;
  for (const auto& option : AllOptions()) keys.push_back(option.key);
  auto config = ResolveConfig(keys, {{"config", path}}, {});
  fuzz::CheckMessage(config.status());
  return 0;
}
