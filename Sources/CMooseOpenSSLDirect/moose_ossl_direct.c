#include "moose_ossl_direct.h"

#include <openssl/core.h>
#include <openssl/core_dispatch.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/provider.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

static atomic_int preferred = 0;

void moose_ossl_direct_prefer(void) { atomic_store(&preferred, 1); }
int moose_ossl_direct_preferred(void) { return atomic_load(&preferred); }

/* Decided once: the provider, its context and the functions used. Read-only afterwards. */
static struct {
    int usable;
    const char *reason;
    void *provctx;
    OSSL_FUNC_cipher_newctx_fn *gcm_new;
    OSSL_FUNC_cipher_freectx_fn *gcm_free;
    OSSL_FUNC_cipher_decrypt_init_fn *gcm_decrypt_init;
    OSSL_FUNC_cipher_update_fn *gcm_update;
    OSSL_FUNC_cipher_final_fn *gcm_final;
    OSSL_FUNC_cipher_set_ctx_params_fn *gcm_set_params;
    OSSL_FUNC_digest_newctx_fn *sha_new;
    OSSL_FUNC_digest_freectx_fn *sha_free;
    OSSL_FUNC_digest_init_fn *sha_init;
    OSSL_FUNC_digest_update_fn *sha_update;
    OSSL_FUNC_digest_final_fn *sha_final;
} direct;

/* Each GCM key size has its own algorithm entry; keep one table per size. */
static struct gcm_table {
    OSSL_FUNC_cipher_newctx_fn *new_ctx;
    size_t key_length;
} gcm_tables[3];

static pthread_once_t decide_once = PTHREAD_ONCE_INIT;

struct providers_seen {
    OSSL_PROVIDER *default_provider;
    int other;
};

static int note_provider(OSSL_PROVIDER *provider, void *arg) {
    struct providers_seen *seen = arg;
    const char *name = OSSL_PROVIDER_get0_name(provider);
    if (name == NULL) { seen->other = 1; return 1; }
    if (strcmp(name, "default") == 0) seen->default_provider = provider;
    else if (strcmp(name, "base") != 0 && strcmp(name, "legacy") != 0) seen->other = 1;
    return 1;
}

/* 1 when `names` (libcrypto's "A:B:C" list) contains exactly `name`. */
static int has_name(const char *names, const char *name) {
    size_t length = strlen(name);
    const char *p = names;
    while (p != NULL && *p != '\0') {
        const char *end = strchr(p, ':');
        size_t segment = end ? (size_t)(end - p) : strlen(p);
        if (segment == length && memcmp(p, name, length) == 0) return 1;
        p = end ? end + 1 : NULL;
    }
    return 0;
}

static const OSSL_DISPATCH *implementation(const OSSL_ALGORITHM *algorithms, const char *name) {
    const OSSL_DISPATCH *found = NULL;
    for (const OSSL_ALGORITHM *a = algorithms; a != NULL && a->algorithm_names != NULL; a++) {
        if (has_name(a->algorithm_names, name)) {
            if (found != NULL) return NULL; /* two candidates: let EVP decide */
            found = a->implementation;
        }
    }
    return found;
}

static void (*function(const OSSL_DISPATCH *table, int id))(void) {
    for (; table != NULL && table->function_id != 0; table++)
        if (table->function_id == id) return table->function;
    return NULL;
}

static void decide(void) {
    direct.usable = 0;
    /* The system's policy first: openssl.cnf (or OPENSSL_CONF) may activate a FIPS provider, another
       provider, or ask for FIPS in the default properties. */
    if (OPENSSL_init_crypto(OPENSSL_INIT_LOAD_CONFIG, NULL) != 1) {
        direct.reason = "libcrypto's configuration did not load";
        return;
    }
    if (EVP_default_properties_is_fips_enabled(NULL)) {
        direct.reason = "libcrypto's default properties ask for FIPS";
        return;
    }
    struct providers_seen seen = { NULL, 0 };
    if (OSSL_PROVIDER_do_all(NULL, note_provider, &seen) != 1 || seen.other) {
        direct.reason = "a provider other than default, base or legacy is active";
        return;
    }
    if (seen.default_provider == NULL) {
        direct.reason = "the default provider is not active";
        return;
    }
    int no_cache = 0;
    const OSSL_ALGORITHM *ciphers = OSSL_PROVIDER_query_operation(seen.default_provider, OSSL_OP_CIPHER, &no_cache);
    const OSSL_ALGORITHM *digests = OSSL_PROVIDER_query_operation(seen.default_provider, OSSL_OP_DIGEST, &no_cache);
    const char *gcm_names[3] = { "AES-128-GCM", "AES-192-GCM", "AES-256-GCM" };
    const OSSL_DISPATCH *gcm[3];
    for (int i = 0; i < 3; i++) {
        gcm[i] = implementation(ciphers, gcm_names[i]);
        gcm_tables[i].key_length = (size_t)(16 + 8 * i);
        gcm_tables[i].new_ctx = gcm[i] ? (OSSL_FUNC_cipher_newctx_fn *)function(gcm[i], OSSL_FUNC_CIPHER_NEWCTX) : NULL;
    }
    const OSSL_DISPATCH *sha = implementation(digests, "SHA2-256");
    const OSSL_DISPATCH *g = gcm[2];
    if (g == NULL || sha == NULL) {
        direct.reason = "the default provider offers no single AES-256-GCM or SHA2-256";
        return;
    }
    /* All GCM sizes share the provider's functions but for newctx (one per key size). */
    direct.gcm_free = (OSSL_FUNC_cipher_freectx_fn *)function(g, OSSL_FUNC_CIPHER_FREECTX);
    direct.gcm_decrypt_init = (OSSL_FUNC_cipher_decrypt_init_fn *)function(g, OSSL_FUNC_CIPHER_DECRYPT_INIT);
    direct.gcm_update = (OSSL_FUNC_cipher_update_fn *)function(g, OSSL_FUNC_CIPHER_UPDATE);
    direct.gcm_final = (OSSL_FUNC_cipher_final_fn *)function(g, OSSL_FUNC_CIPHER_FINAL);
    direct.gcm_set_params = (OSSL_FUNC_cipher_set_ctx_params_fn *)function(g, OSSL_FUNC_CIPHER_SET_CTX_PARAMS);
    direct.sha_new = (OSSL_FUNC_digest_newctx_fn *)function(sha, OSSL_FUNC_DIGEST_NEWCTX);
    direct.sha_free = (OSSL_FUNC_digest_freectx_fn *)function(sha, OSSL_FUNC_DIGEST_FREECTX);
    direct.sha_init = (OSSL_FUNC_digest_init_fn *)function(sha, OSSL_FUNC_DIGEST_INIT);
    direct.sha_update = (OSSL_FUNC_digest_update_fn *)function(sha, OSSL_FUNC_DIGEST_UPDATE);
    direct.sha_final = (OSSL_FUNC_digest_final_fn *)function(sha, OSSL_FUNC_DIGEST_FINAL);
    for (int i = 0; i < 3; i++) {
        if (gcm[i] != NULL
            && ((OSSL_FUNC_cipher_freectx_fn *)function(gcm[i], OSSL_FUNC_CIPHER_FREECTX) != direct.gcm_free
                || (OSSL_FUNC_cipher_update_fn *)function(gcm[i], OSSL_FUNC_CIPHER_UPDATE) != direct.gcm_update
                || (OSSL_FUNC_cipher_final_fn *)function(gcm[i], OSSL_FUNC_CIPHER_FINAL) != direct.gcm_final
                || (OSSL_FUNC_cipher_decrypt_init_fn *)function(gcm[i], OSSL_FUNC_CIPHER_DECRYPT_INIT) != direct.gcm_decrypt_init
                || (OSSL_FUNC_cipher_set_ctx_params_fn *)function(gcm[i], OSSL_FUNC_CIPHER_SET_CTX_PARAMS) != direct.gcm_set_params))
            gcm_tables[i].new_ctx = NULL; /* a size that does not share them is left to EVP */
    }
    if (gcm_tables[2].new_ctx == NULL || direct.gcm_free == NULL || direct.gcm_decrypt_init == NULL
        || direct.gcm_update == NULL || direct.gcm_final == NULL || direct.gcm_set_params == NULL
        || direct.sha_new == NULL || direct.sha_free == NULL || direct.sha_init == NULL
        || direct.sha_update == NULL || direct.sha_final == NULL) {
        direct.reason = "the default provider lacks a function this path calls";
        return;
    }
    direct.provctx = OSSL_PROVIDER_get0_provider_ctx(seen.default_provider);
    direct.reason = NULL;
    direct.usable = 1;
}

int moose_ossl_direct_available(const char **reason) {
    pthread_once(&decide_once, decide);
    if (reason != NULL) *reason = direct.reason;
    return direct.usable;
}

void *moose_ossl_direct_gcm_new(const unsigned char *key, size_t key_length) {
    if (!moose_ossl_direct_available(NULL)) return NULL;
    OSSL_FUNC_cipher_newctx_fn *new_ctx = NULL;
    for (int i = 0; i < 3; i++)
        if (gcm_tables[i].key_length == key_length) new_ctx = gcm_tables[i].new_ctx;
    if (new_ctx == NULL) return NULL;
    void *ctx = new_ctx(direct.provctx);
    if (ctx == NULL) return NULL;
    if (direct.gcm_decrypt_init(ctx, key, key_length, NULL, 0, NULL) != 1) {
        direct.gcm_free(ctx);
        return NULL;
    }
    return ctx;
}

void moose_ossl_direct_gcm_free(void *context) {
    if (context != NULL) direct.gcm_free(context);
}

int moose_ossl_direct_gcm_open(void *context, const unsigned char *nonce, size_t nonce_length,
                               const unsigned char *aad, size_t aad_length,
                               const unsigned char *ciphertext, size_t ciphertext_length,
                               const unsigned char *tag, size_t tag_length, unsigned char *out) {
    if (context == NULL || nonce_length != 12 || tag_length != 16) return -1;
    /* The nonce (the key stays); the tag to check, as EVP_CTRL_AEAD_SET_TAG would set it. */
    if (direct.gcm_decrypt_init(context, NULL, 0, nonce, nonce_length, NULL) != 1) return -1;
    OSSL_PARAM params[2] = {
        OSSL_PARAM_construct_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, (void *)tag, tag_length),
        OSSL_PARAM_construct_end(),
    };
    if (direct.gcm_set_params(context, params) != 1) return -1;
    size_t written = 0;
    /* AAD: an update without output (the provider still wants room for it, as EVP passes). */
    if (aad_length > 0 && direct.gcm_update(context, NULL, &written, aad_length, aad, aad_length) != 1) return -1;
    size_t total = 0;
    if (ciphertext_length > 0) {
        if (direct.gcm_update(context, out, &written, ciphertext_length, ciphertext, ciphertext_length) != 1
            || written > ciphertext_length) {
            OPENSSL_cleanse(out, ciphertext_length);
            return -1;
        }
        total = written;
    }
    size_t final_written = 0;
    unsigned char *rest = out != NULL ? out + total : NULL;
    if (direct.gcm_final(context, rest, &final_written, ciphertext_length - total) != 1
        || total + final_written != ciphertext_length) {
        if (ciphertext_length > 0) OPENSSL_cleanse(out, ciphertext_length);
        ERR_clear_error();
        return 0;
    }
    return 1;
}

static int sha256(void *ctx, const unsigned char *a, size_t a_length, const unsigned char *b, size_t b_length,
                  unsigned char *out) {
    size_t length = 0;
    return direct.sha_init(ctx, NULL) == 1
        && direct.sha_update(ctx, a, a_length) == 1
        && (b_length == 0 || direct.sha_update(ctx, b, b_length) == 1)
        && direct.sha_final(ctx, out, &length, 32) == 1
        && length == 32;
}

int moose_ossl_direct_hmac_sha256(const unsigned char *key, size_t key_length,
                                  const unsigned char *message, size_t message_length, unsigned char *out) {
    if (!moose_ossl_direct_available(NULL)) return 0;
    void *ctx = direct.sha_new(direct.provctx);
    if (ctx == NULL) return 0;
    unsigned char block[64], pad[64], inner[32];
    int ok = 1;
    memset(block, 0, sizeof block);
    if (key_length > sizeof block) ok = sha256(ctx, key, key_length, NULL, 0, block);
    else if (key_length > 0) memcpy(block, key, key_length);
    if (ok) {
        for (size_t i = 0; i < sizeof pad; i++) pad[i] = block[i] ^ 0x36;
        ok = sha256(ctx, pad, sizeof pad, message, message_length, inner);
    }
    if (ok) {
        for (size_t i = 0; i < sizeof pad; i++) pad[i] = block[i] ^ 0x5c;
        ok = sha256(ctx, pad, sizeof pad, inner, sizeof inner, out);
    }
    OPENSSL_cleanse(block, sizeof block);
    OPENSSL_cleanse(pad, sizeof pad);
    OPENSSL_cleanse(inner, sizeof inner);
    direct.sha_free(ctx);
    if (!ok) OPENSSL_cleanse(out, 32);
    return ok;
}
