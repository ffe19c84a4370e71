#ifndef MOOSE_BENCH_STORE_FLOOR_H
#define MOOSE_BENCH_STORE_FLOOR_H
#include <stddef.h>

/// The same schema and durability settings as MooseSecretStore, with plaintext values: the floor the
/// encrypted store is compared with. `key` is NULL for plain SQLite, a passphrase or "x'hex'" for SQLCipher.
typedef struct store_floor store_floor;
store_floor *store_floor_open(const char *path, int synchronous_full, const char *key);
int store_floor_put(store_floor *s, const char *name, const unsigned char *value, size_t length);
/// Copies the value into `out` (capacity `capacity`); returns its length, or -1.
long store_floor_get(store_floor *s, const char *name, unsigned char *out, size_t capacity);
void store_floor_close(store_floor *s);

/// AES-256-GCM straight from EVP with a context reused across messages (libcrypto's own throughput).
void *gcm_floor_new(const unsigned char *key32);
int gcm_floor_seal(void *ctx, const unsigned char *iv12, const unsigned char *aad, size_t aad_len,
                   const unsigned char *in, size_t len, unsigned char *out, unsigned char *tag16);
int gcm_floor_open(void *ctx, const unsigned char *iv12, const unsigned char *aad, size_t aad_len,
                   const unsigned char *in, size_t len, unsigned char *out, const unsigned char *tag16);
void gcm_floor_free(void *ctx);
#endif
