#include "floor.h"
#include <openssl/crypto.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/x509.h>

void *floor_import_spki(const unsigned char *der, size_t length) {
    const unsigned char *p = der;
    return d2i_PUBKEY(NULL, &p, (long)length);
}

void floor_free_key(void *key) { EVP_PKEY_free((EVP_PKEY *)key); }

int floor_verify(void *key, const char *md, const unsigned char *sig, size_t sig_len,
                 const unsigned char *msg, size_t msg_len) {
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = EVP_DigestVerifyInit_ex(ctx, NULL, md, NULL, NULL, (EVP_PKEY *)key, NULL) == 1
          && EVP_DigestVerify(ctx, sig, sig_len, msg, msg_len) == 1;
    EVP_MD_CTX_free(ctx);
    return ok;
}

int floor_hmac_sha256(const unsigned char *key, size_t key_len, const unsigned char *msg, size_t msg_len,
                      const unsigned char *tag) {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int out_len = 0;
    if (HMAC(EVP_sha256(), key, (int)key_len, msg, msg_len, out, &out_len) == NULL) return 0;
    return out_len == 32 && CRYPTO_memcmp(out, tag, 32) == 0;
}

size_t floor_ecdsa_raw_to_der(const unsigned char *raw, size_t size, unsigned char *out) {
    ECDSA_SIG *sig = ECDSA_SIG_new();
    BIGNUM *r = BN_bin2bn(raw, (int)size, NULL), *s = BN_bin2bn(raw + size, (int)size, NULL);
    ECDSA_SIG_set0(sig, r, s);
    unsigned char *p = out;
    int length = i2d_ECDSA_SIG(sig, &p);
    ECDSA_SIG_free(sig);
    return length > 0 ? (size_t)length : 0;
}

void *floor_import_pkcs8(const unsigned char *der, size_t length) {
    const unsigned char *p = der;
    return d2i_AutoPrivateKey(NULL, &p, (long)length);
}

int floor_es256_sign(void *key, const unsigned char *msg, size_t msg_len, unsigned char *raw) {
    unsigned char der[128];
    size_t der_len = sizeof der;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = EVP_DigestSignInit_ex(ctx, NULL, "SHA256", NULL, NULL, (EVP_PKEY *)key, NULL) == 1
          && EVP_DigestSign(ctx, der, &der_len, msg, msg_len) == 1;
    EVP_MD_CTX_free(ctx);
    if (!ok) return 0;
    const unsigned char *p = der;
    ECDSA_SIG *sig = d2i_ECDSA_SIG(NULL, &p, (long)der_len);
    if (sig == NULL) return 0;
    const BIGNUM *r = NULL, *s = NULL;
    ECDSA_SIG_get0(sig, &r, &s);
    ok = BN_bn2binpad(r, raw, 32) == 32 && BN_bn2binpad(s, raw + 32, 32) == 32;
    ECDSA_SIG_free(sig);
    return ok;
}
