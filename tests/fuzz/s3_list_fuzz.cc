// S3's listings (XML) as any server or proxy on the way might send them: a ListObjectsV2 page, and
// a ListMultipartUploads page (the uploads retention aborts).
#include "fuzz.h"
#include "store/s3.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace quorate;
  const std::string xml(fuzz::Text(data, size));
  auto page = s3::ParseListPage(xml);
  fuzz::CheckMessage(page.status());
  auto uploads = s3::ParseMultipartUploads(xml);
  fuzz::CheckMessage(uploads.status());
  if (uploads.ok()) {
    for (const auto& u : uploads->uploads) {
      if (u.key.empty() || u.upload_id.empty()) std::abort();
    }
  }
  return 0;
}
