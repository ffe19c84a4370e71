#include "store_floor.h"
#include <openssl/evp.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

struct store_floor {
    sqlite3 *db;
    sqlite3_stmt *put, *get;
};

static long long now_ms(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (long long)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

store_floor *store_floor_open(const char *path, int synchronous_full, const char *key) {
    store_floor *s = calloc(1, sizeof *s);
    if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
        free(s);
        return NULL;
    }
    sqlite3_busy_timeout(s->db, 5000);
    if (key) {
        char sql[300];
        snprintf(sql, sizeof sql, "PRAGMA key = \"%s\"", key);
        sqlite3_exec(s->db, sql, NULL, NULL, NULL);
    }
    sqlite3_exec(s->db, "PRAGMA journal_mode=WAL", NULL, NULL, NULL);
    sqlite3_exec(s->db, synchronous_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL", NULL, NULL, NULL);
    sqlite3_exec(s->db, "PRAGMA secure_delete=ON", NULL, NULL, NULL);
    sqlite3_exec(s->db,
                 "CREATE TABLE IF NOT EXISTS secrets (namespace TEXT NOT NULL, name TEXT NOT NULL, key_id INTEGER NOT NULL,"
                 " sealed BLOB NOT NULL, updated_at INTEGER NOT NULL, PRIMARY KEY (namespace, name))",
                 NULL, NULL, NULL);
#if SQLITE_VERSION_NUMBER >= 3024000
    // The statement MooseSecretStore uses.
    sqlite3_prepare_v2(s->db,
                       "INSERT INTO secrets (namespace, name, key_id, sealed, updated_at) VALUES ('bench', ?, 1, ?, ?)"
                       " ON CONFLICT(namespace, name) DO UPDATE SET key_id = excluded.key_id, sealed = excluded.sealed,"
                       " updated_at = excluded.updated_at",
                       -1, &s->put, NULL);
#else
    // SQLCipher 3.4 is SQLite 3.15, which predates upsert.
    sqlite3_prepare_v2(s->db,
                       "INSERT OR REPLACE INTO secrets (namespace, name, key_id, sealed, updated_at) VALUES ('bench', ?, 1, ?, ?)",
                       -1, &s->put, NULL);
#endif
    sqlite3_prepare_v2(s->db, "SELECT key_id, sealed FROM secrets WHERE namespace = 'bench' AND name = ?", -1,
                       &s->get, NULL);
    return s;
}

int store_floor_put(store_floor *s, const char *name, const unsigned char *value, size_t length) {
    // One transaction per operation, like SecretStore.put.
    sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    sqlite3_bind_text(s->put, 1, name, -1, SQLITE_TRANSIENT);
    sqlite3_bind_blob(s->put, 2, value, (int)length, SQLITE_TRANSIENT);
    sqlite3_bind_int64(s->put, 3, now_ms());
    int rc = sqlite3_step(s->put);
    sqlite3_reset(s->put);
    sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
    return rc == SQLITE_DONE ? 0 : -1;
}

long store_floor_get(store_floor *s, const char *name, unsigned char *out, size_t capacity) {
    sqlite3_bind_text(s->get, 1, name, -1, SQLITE_TRANSIENT);
    long length = -1;
    if (sqlite3_step(s->get) == SQLITE_ROW) {
        int n = sqlite3_column_bytes(s->get, 1);
        const void *blob = sqlite3_column_blob(s->get, 1);
        if ((size_t)n <= capacity) {
            memcpy(out, blob, (size_t)n);
            length = n;
        }
    }
    sqlite3_reset(s->get);
    return length;
}

void store_floor_close(store_floor *s) {
    sqlite3_finalize(s->put);
    sqlite3_finalize(s->get);
    sqlite3_close_v2(s->db);
    free(s);
}

void *gcm_floor_new(const unsigned char *key32) {
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    EVP_CipherInit_ex(ctx, EVP_aes_256_gcm(), NULL, key32, NULL, -1);
    return ctx;
}

int gcm_floor_seal(void *c, const unsigned char *iv12, const unsigned char *aad, size_t aad_len,
                   const unsigned char *in, size_t len, unsigned char *out, unsigned char *tag16) {
    EVP_CIPHER_CTX *ctx = c;
    int n = 0;
    EVP_CipherInit_ex(ctx, NULL, NULL, NULL, iv12, 1);
    EVP_CipherUpdate(ctx, NULL, &n, aad, (int)aad_len);
    EVP_CipherUpdate(ctx, out, &n, in, (int)len);
    EVP_CipherFinal_ex(ctx, out + n, &n);
    return EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, tag16);
}

int gcm_floor_open(void *c, const unsigned char *iv12, const unsigned char *aad, size_t aad_len,
                   const unsigned char *in, size_t len, unsigned char *out, const unsigned char *tag16) {
    EVP_CIPHER_CTX *ctx = c;
    int n = 0;
    EVP_CipherInit_ex(ctx, NULL, NULL, NULL, iv12, 0);
    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, 16, (void *)tag16);
    EVP_CipherUpdate(ctx, NULL, &n, aad, (int)aad_len);
    EVP_CipherUpdate(ctx, out, &n, in, (int)len);
    return EVP_CipherFinal_ex(ctx, out + n, &n);
}

void gcm_floor_free(void *c) { EVP_CIPHER_CTX_free(c); }
