// The head of an etcd WAL file, read to learn whose data a data dir holds.
#include "etcd/etcd_wal.h"
#include "fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace quorate;
  fuzz::CheckMessage(ParseWalIdentity(fuzz::Text(data, size)).status());
  return 0;
}
