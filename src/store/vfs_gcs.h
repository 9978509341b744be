// The Cloud Storage backend of the Vfs seam, on the JSON API: objects insert (uploadType=media for a
// record and a small stream, uploadType=resumable in parts beyond one part), ifGenerationMatch=0 for
// an exclusive create, list by prefix page by page, get with alt=media and ranges, delete.
#pragma once

#include <memory>
#include <string>

#include "quorate/clock.h"
#include "quorate/status.h"
#include "quorate/vfs.h"
#include "store/object_store.h"

namespace quorate {

// "gs://bucket/prefix?endpoint=http://127.0.0.1:4443&timeout=5s&page_size=1000", every parameter
// optional:
//   endpoint   default https://storage.googleapis.com
//   timeout    the longest one Vfs call takes, retries included (default 5s)
//   page_size  names a listing page asks for (maxResults), 1-1000
// `token` gives the bearer token (OAuth scope devstorage.read_write) for each request; without one,
// $GOOGLE_OAUTH_ACCESS_TOKEN, else Google's chain (net/cloud/google_credentials.h: a key or external
// account file, else the metadata server). A token refused with 401 is fetched again once.
// InvalidArgument, naming the part and the fix, for a bad URL or a credentials file that is not one.
//
// Errors of the calls: NotFound for a missing key; InvalidArgument for a rejected token (401), a
// missing permission (403), a missing bucket and other refusals; Unavailable when the store does not
// answer, answers 5xx or times out after up to 3 tries, or when a listing repeats a page token, hands
// out a token that is not printable ASCII or goes on past 1000 pages; DataLoss for a body larger
// than asked for or a listing page over 4 MiB. Each call ends within `timeout` and `deadline`.
Result<std::unique_ptr<Vfs>> OpenGcsVfs(const std::string& url, Clock::TimePoint deadline = Clock::kNever,
                                        BearerTokenSource token = {});

}  // namespace quorate
