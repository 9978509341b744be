// A backup's _etcd_backup.meta as read from a store (ours, or etcd-manager's from kOps): decoded
// without crashing, and what it accepts names its object as one file of the folder (never a path
// out of it) and re-encodes to the two metadata files, which decode to the same backup.
#include "backup/backup.h"
#include "fuzz.h"
#include "quorate/vfs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace quorate;
  auto meta = DecodeBackupMeta(std::string(fuzz::Text(data, size)));
  fuzz::CheckMessage(meta.status());
  if (!meta.ok()) return 0;
  if (meta->object.find('/') != std::string::npos || !ValidateKey(meta->object).ok()) std::abort();
  const BackupMetaFiles files = EncodeBackupMeta(*meta);
  auto again = DecodeBackupMeta(files.etcd_manager, files.quorate);
  if (!again.ok()) std::abort();
  if (again->object != meta->object || again->sha256 != meta->sha256 || again->key_id != meta->key_id ||
      again->revision != meta->revision || again->cluster_id != meta->cluster_id ||
      again->compression != meta->compression) {
    std::abort();
  }
  return 0;
}
