// The member bucket as read back from a volume or a shared store: decoded, checked end to end (IDs
// recomputed), and what it accepts re-encodes to a bucket that decodes to the same members.
#include "core/bucket.h"
#include "fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace quorate;
  auto bucket = DecodeBucket(fuzz::Text(data, size), "fuzz");
  fuzz::CheckMessage(bucket.status());
  if (!bucket.ok()) return 0;
  auto again = DecodeBucket(EncodeBucket(*bucket), "re-encoded");
  if (!again.ok()) std::abort();
  if (again->members.cluster_id() != bucket->members.cluster_id()) std::abort();
  return 0;
}
