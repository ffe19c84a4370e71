#ifndef MOOSE_BENCH_FLOOR_H
#define MOOSE_BENCH_FLOOR_H
#include <stddef.h>

/// An imported public key (EVP_PKEY *), made once from DER SubjectPublicKeyInfo.
void *floor_import_spki(const unsigned char *der, size_t length);
void floor_free_key(void *key);

/// One EVP_DigestVerify of `sig` over `msg`; `md` is "SHA256" or NULL (Ed25519). Returns 1 if valid.
int floor_verify(void *key, const char *md, const unsigned char *sig, size_t sig_len,
                 const unsigned char *msg, size_t msg_len);

/// One HMAC-SHA256 over `msg` compared with `tag` (32 bytes). Returns 1 if equal.
int floor_hmac_sha256(const unsigned char *key, size_t key_len, const unsigned char *msg, size_t msg_len,
                      const unsigned char *tag);

/// ECDSA raw r||s (2 * size bytes) to DER, into `out` (at least 2 * size + 16 bytes). Returns the DER length.
size_t floor_ecdsa_raw_to_der(const unsigned char *raw, size_t size, unsigned char *out);

/// An imported private key (EVP_PKEY *), made once from DER PKCS#8.
void *floor_import_pkcs8(const unsigned char *der, size_t length);

/// One ES256 signature of `msg` (EVP_DigestSign, SHA-256), converted to raw r||s (64 bytes) into
/// `raw`: the libcrypto work a JWS signer cannot avoid. Returns 1 on success.
int floor_es256_sign(void *key, const unsigned char *msg, size_t msg_len, unsigned char *raw);

#endif
