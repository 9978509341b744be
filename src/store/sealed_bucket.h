// A member bucket sealed in a shared store (`--bucket file://...` or `s3://...`), at the key the
// rendezvous uses, <token>/sealed: `quorate cluster-init` writes it once, and `init`/`run` read it
// instead of discovering, so nodes started later need no discovery service at all.
#pragma once

#include <optional>
#include <string>

#include "core/bucket.h"
#include "quorate/status.h"

namespace quorate {

// nullopt when nothing is sealed for `token`; DataLoss for a corrupt or foreign object.
Result<std::optional<Bucket>> ReadSealedBucket(const std::string& store_url, const std::string& token);

// Seals `bucket` unless something is sealed already: true when this call wrote it, false when the
// same member set was already there; FailedPrecondition (nothing overwritten) when another one is.
Result<bool> WriteSealedBucket(const std::string& store_url, const Bucket& bucket);

}  // namespace quorate
