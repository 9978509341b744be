// The head of an etcd WAL file, read to learn whose data a data dir holds and whether its raft log
// went past the bootstrap.
#include "etcd/etcd_wal.h"
#include "fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace quorate;
  const std::string_view head = fuzz::Text(data, size);
  fuzz::CheckMessage(ParseWalIdentity(head).status());
  // A head the read cut short is never less careful than the same bytes as a whole file.
  if (ParseWalPastBootstrap(head, true) && !ParseWalPastBootstrap(head, false)) std::abort();
  return 0;
}
