// The Azure Blob Storage backend of the Vfs seam, on the Blob REST API (x-ms-version pinned): Put
// Blob for a record and a small stream, Put Block and Put Block List beyond one part, If-None-Match: *
// for an exclusive create, List Blobs by prefix with markers, Get Blob with ranges, Delete Blob.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "quorate/clock.h"
#include "quorate/status.h"
#include "quorate/vfs.h"
#include "store/object_store.h"

namespace quorate {

// The Blob service version every request names.
inline constexpr const char* kAzureBlobVersion = "2021-08-06";

// "azblob://account/container/prefix?endpoint=http://127.0.0.1:10000&timeout=5s&page_size=5000",
// every parameter optional:
//   endpoint     default https://<account>.blob.<the environment's storage suffix>; an endpoint
//                whose host does not start with "<account>." takes the account as the path's first
//                segment (azurite's and IP-style URLs)
//   environment  public (default), usgovernment or china: the endpoint and the identity platform
//   timeout      the longest one Vfs call takes, retries included (default 5s)
//   page_size    names a listing page asks for (maxresults), 1-5000
// Credentials: Shared Key with the account key in $AZURE_STORAGE_KEY; else a bearer token for
// https://storage.azure.com/ from `token`, else $AZURE_STORAGE_ACCESS_TOKEN, else Azure's chain
// (net/cloud/azure_credentials.h: client secret, workload identity, managed identity). A token
// refused with 401 is fetched again once. InvalidArgument, naming the part and the fix, for a bad
// URL, a key that is not base64 or a chain misconfigured.
//
// Errors of the calls are those of OpenGcsVfs (vfs_gcs.h), with the Blob service's error codes.
Result<std::unique_ptr<Vfs>> OpenAzblobVfs(const std::string& url, Clock::TimePoint deadline = Clock::kNever,
                                           BearerTokenSource token = {});

namespace azblob {

// The Shared Key signature's string to sign for a request as it goes on the wire (`target` is the
// encoded path and query), for `account`.
std::string StringToSign(const std::string& method, const std::string& target,
                         const std::vector<std::pair<std::string, std::string>>& headers, size_t body_bytes,
                         const std::string& account);
// The Authorization header's value: SharedKey account:base64(HMAC-SHA256(key, string to sign)).
std::string SharedKeyAuthorization(const std::string& account, const std::string& key, const std::string& to_sign);

}  // namespace azblob
}  // namespace quorate
