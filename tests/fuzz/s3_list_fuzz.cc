// An S3 ListObjectsV2 answer (XML), as any server or proxy on the way might send it.
#include "fuzz.h"
#include "quorate/s3.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace quorate;
  auto page = s3::ParseListPage(std::string(fuzz::Text(data, size)));
  fuzz::CheckMessage(page.status());
  return 0;
}
