#include "store/sealed_bucket.h"

#include <fmt/format.h>

#include "quorate/rendezvous.h"
#include "quorate/vfs.h"

namespace quorate {
namespace {

std::string SealedKey(const std::string& token) { return token + "/sealed"; }

Result<std::optional<Bucket>> ReadFrom(Vfs& vfs, const std::string& token) {
  std::string key = SealedKey(token);
  auto text = vfs.Read(key, kMaxRecordBytes);
  if (!text.ok()) {
    if (text.status().IsNotFound()) return std::optional<Bucket>();
    return text.status();
  }
  std::string where = fmt::format("{}/{}", vfs.Describe(), key);
  auto bucket = DecodeBucket(*text, where);
  if (!bucket.ok()) return bucket.status();
  if (bucket->members.token() != token) {
    return Status::DataLoss(fmt::format("member bucket {} is for token '{}', not '{}'", where,
                                        bucket->members.token(), token));
  }
  return std::optional<Bucket>(std::move(*bucket));
}

}  // namespace

Result<std::optional<Bucket>> ReadSealedBucket(const std::string& store_url, const std::string& token) {
  if (Status s = ValidateKey(SealedKey(token)); !s.ok()) return s.Prefixed("--initial-cluster-token");
  auto vfs = OpenVfs(store_url);
  if (!vfs.ok()) return vfs.status().Prefixed("--bucket");
  return ReadFrom(**vfs, token);
}

Result<bool> WriteSealedBucket(const std::string& store_url, const Bucket& bucket) {
  const std::string& token = bucket.members.token();
  if (Status s = ValidateKey(SealedKey(token)); !s.ok()) return s.Prefixed("--initial-cluster-token");
  auto vfs = OpenVfs(store_url);
  if (!vfs.ok()) return vfs.status().Prefixed("--bucket");
  auto created = (*vfs)->CreateIfAbsent(SealedKey(token), EncodeBucket(bucket));
  if (!created.ok()) return created.status();
  if (*created) return true;
  auto existing = ReadFrom(**vfs, token);
  if (!existing.ok()) return existing.status();
  if (*existing && (*existing)->members.members() == bucket.members.members()) return false;
  return Status::FailedPrecondition(fmt::format(
      "{}/{} already holds another member set for token '{}'; nothing was overwritten (use another token, or "
      "move the old bucket aside if that cluster is gone)",
      (*vfs)->Describe(), SealedKey(token), token));
}

}  // namespace quorate
