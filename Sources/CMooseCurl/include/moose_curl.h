#ifndef MOOSE_CURL_H
#define MOOSE_CURL_H
#include <stddef.h>

/// A libcurl "easy" transfer, with libcurl loaded lazily by dlopen: programs that never make a
/// request (moose inspect, moose token with a cached token) never load libcurl and the ~30
/// libraries behind it. No libcurl headers are needed to build: the option numbers used here are
/// part of libcurl's stable ABI.

typedef struct moose_curl_response {
    long status;                 ///< HTTP status code (0 if no response)
    unsigned char *body;         ///< response body (malloc'd), body_length bytes
    size_t body_length;
    char *headers;               ///< raw response header block(s), NUL-terminated (malloc'd)
    size_t headers_length;
    int truncated;               ///< 1 if the body exceeded max_body and the transfer was stopped
    char error[256];             ///< libcurl's message on failure
} moose_curl_response;

/// 1 if libcurl could be loaded (dlopen of libcurl.so.4 / libcurl.4.dylib); 0 otherwise, with a reason.
int moose_curl_load(char *reason, size_t reason_size);

/// Performs one request. `headers` are "Name: value" strings. Returns 0 on success (any HTTP status),
/// otherwise the libcurl error code (or -1 if libcurl is unavailable) with `out->error` set.
/// `cancel_flag` (may be NULL) is polled during the transfer; when it becomes non-zero the transfer stops.
/// `ca_file` (may be NULL) is a PEM bundle of the CAs to trust instead of the system's (CURLOPT_CAINFO).
/// `pinned_public_key` (may be NULL) is "sha256//BASE64[;sha256//BASE64…]" (CURLOPT_PINNEDPUBLICKEY):
/// the server's key must be one of these, checked after (never instead of) the certificate's
/// verification; a mismatch fails with CURLE_SSL_PINNEDPUBKEYNOTMATCH (90).
int moose_curl_perform(const char *method, const char *url,
                       const char *const *headers, size_t header_count,
                       const unsigned char *body, size_t body_length,
                       long timeout_ms, long connect_timeout_ms, size_t max_body,
                       const int *cancel_flag, const char *ca_file, const char *pinned_public_key,
                       moose_curl_response *out);

/// Frees the buffers of a response.
void moose_curl_response_free(moose_curl_response *response);

/// Sets a cancel flag from another thread (an atomic release store: the transfer's poll sees it).
void moose_cancel_flag_set(int *flag);
/// Reads a cancel flag (an atomic acquire load).
int moose_cancel_flag_get(const int *flag);

#endif
