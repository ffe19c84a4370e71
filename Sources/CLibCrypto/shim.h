#ifndef MOOSE_CLIBCRYPTO_SHIM_H
#define MOOSE_CLIBCRYPTO_SHIM_H

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/decoder.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/param_build.h>
#include <openssl/params.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>

// OPENSSL_free is a function-like macro (it passes __FILE__/__LINE__); Swift cannot call it.
static inline void moose_openssl_free(void *ptr) { OPENSSL_free(ptr); }

// BN_num_bytes is a function-like macro over BN_num_bits; Swift cannot call it.
static inline int moose_bn_num_bytes(const BIGNUM *bn) { return BN_num_bytes(bn); }

// EVP_PKEY_Q_keygen is variadic (the extra argument depends on the key type); Swift cannot call
// C variadic functions, so each key type gets a fixed-signature wrapper.
static inline EVP_PKEY *moose_keygen_rsa(size_t bits) {
    return EVP_PKEY_Q_keygen(NULL, NULL, "RSA", bits);
}

// EVP_PKEY_Q_keygen is variadic: fixed-signature wrapper for EC keys on a named curve.
static inline EVP_PKEY *moose_keygen_ec(const char *curve) {
    return EVP_PKEY_Q_keygen(NULL, NULL, "EC", curve);
}

// EVP_PKEY_Q_keygen is variadic: fixed-signature wrapper for Ed25519 (no extra argument).
static inline EVP_PKEY *moose_keygen_ed25519(void) {
    return EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
}

// EVP_PKEY_PUBLIC_KEY / EVP_PKEY_KEYPAIR are macros OR-ing other macros; Swift does not import them.
static inline int moose_selection_public_key(void) { return EVP_PKEY_PUBLIC_KEY; }

// See above: the selection for a full key pair.
static inline int moose_selection_keypair(void) { return EVP_PKEY_KEYPAIR; }

#endif
