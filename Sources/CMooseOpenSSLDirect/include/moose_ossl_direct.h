#ifndef MOOSE_OSSL_DIRECT_H
#define MOOSE_OSSL_DIRECT_H
#include <stddef.h>

/// libcrypto's *default provider* called through the dispatch tables it publishes
/// (`OSSL_PROVIDER_query_operation`, provider-cipher(7), provider-digest(7)) instead of through
/// EVP's fetch. OpenSSL 3.0's first EVP fetch builds the name map from every legacy object name and
/// constructs every algorithm of the operation (124 ciphers for one AES-GCM): 69% of a
/// `moose token` process. The implementations called here are the very ones EVP would call
/// (AES-NI/VAES GCM, the same SHA-256), so nothing about the cryptography changes.
///
/// It is only ever used when EVP would have used the same code: after libcrypto has loaded its
/// configuration (`openssl.cnf`: providers, FIPS), the default properties do not ask for FIPS and
/// every activated provider is `default`, `base` or `legacy` (none of which offers another AES-GCM
/// or SHA-256). Otherwise `moose_ossl_direct_available` says why, and callers use EVP.

/// Asks for the direct path in this process (a program's choice, made in `main`; libraries never
/// call it). Nothing is decided or loaded until `moose_ossl_direct_available` is first called.
void moose_ossl_direct_prefer(void);

/// 1 when `moose_ossl_direct_prefer` was called in this process.
int moose_ossl_direct_preferred(void);

/// 1 when the default provider can be called directly (decided once per process, thread-safe);
/// 0 otherwise, with `*reason` (if not NULL) set to a static English sentence.
int moose_ossl_direct_available(const char **reason);

/// A decrypting AES-GCM context keyed with `key` (16, 24 or 32 bytes), or NULL. Not thread-safe:
/// one user at a time. Free with `moose_ossl_direct_gcm_free`.
void *moose_ossl_direct_gcm_new(const unsigned char *key, size_t key_length);

/// Frees a context from `moose_ossl_direct_gcm_new` (the provider wipes its key schedule).
void moose_ossl_direct_gcm_free(void *context);

/// Checks `tag` (16 bytes) over `aad` and `ciphertext` under `nonce` (12 bytes) and decrypts into
/// `out` (`ciphertext_length` bytes). 1: authentic, `out` holds the plaintext. 0: not authentic,
/// `out` wiped. -1: the provider failed (out wiped).
int moose_ossl_direct_gcm_open(void *context, const unsigned char *nonce, size_t nonce_length,
                               const unsigned char *aad, size_t aad_length,
                               const unsigned char *ciphertext, size_t ciphertext_length,
                               const unsigned char *tag, size_t tag_length, unsigned char *out);

/// HMAC-SHA-256 (RFC 2104) of `message` under `key`, built on the default provider's SHA-256, into
/// `out` (32 bytes). 1 on success, 0 on failure (out wiped).
int moose_ossl_direct_hmac_sha256(const unsigned char *key, size_t key_length,
                                  const unsigned char *message, size_t message_length, unsigned char *out);

#endif
