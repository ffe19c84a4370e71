#include "moose_curl.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// libcurl ABI constants (curl/curl.h); stable across libcurl 7.x and 8.x.
enum {
    OPT_WRITEDATA = 10001, OPT_URL = 10002, OPT_POSTFIELDS = 10015, OPT_USERAGENT = 10018,
    OPT_HTTPHEADER = 10023, OPT_HEADERDATA = 10029, OPT_CUSTOMREQUEST = 10036,
    OPT_WRITEFUNCTION = 20011, OPT_HEADERFUNCTION = 20079, OPT_XFERINFOFUNCTION = 20219,
    OPT_XFERINFODATA = 10057, OPT_NOPROGRESS = 43, OPT_NOBODY = 44, OPT_FOLLOWLOCATION = 52,
    OPT_NOSIGNAL = 99, OPT_TIMEOUT_MS = 155, OPT_CONNECTTIMEOUT_MS = 156, OPT_PROTOCOLS = 181,
    OPT_POSTFIELDSIZE_LARGE = 30120, OPT_ERRORBUFFER = 10010, OPT_CAINFO = 10065, OPT_PINNEDPUBLICKEY = 10230,
    OPT_SSL_VERIFYPEER = 64, OPT_SSL_VERIFYHOST = 81,
    INFO_RESPONSE_CODE = 0x200002,
    PROTO_HTTP = 1, PROTO_HTTPS = 2,
    GLOBAL_DEFAULT = 3,
};

typedef void CURL;
struct curl_slist;
typedef int (*fn_global_init)(long);
typedef CURL *(*fn_easy_init)(void);
typedef int (*fn_easy_setopt)(CURL *, int, ...);
typedef int (*fn_easy_perform)(CURL *);
typedef int (*fn_easy_getinfo)(CURL *, int, ...);
typedef void (*fn_easy_cleanup)(CURL *);
typedef const char *(*fn_easy_strerror)(int);
typedef struct curl_slist *(*fn_slist_append)(struct curl_slist *, const char *);
typedef void (*fn_slist_free_all)(struct curl_slist *);

static struct {
    void *handle;
    fn_global_init global_init;
    fn_easy_init easy_init;
    fn_easy_setopt easy_setopt;
    fn_easy_perform easy_perform;
    fn_easy_getinfo easy_getinfo;
    fn_easy_cleanup easy_cleanup;
    fn_easy_strerror easy_strerror;
    fn_slist_append slist_append;
    fn_slist_free_all slist_free_all;
    char reason[200];
} curl;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void load(void) {
    const char *names[] = {"libcurl.so.4", "libcurl.so", "libcurl.4.dylib", "libcurl.dylib"};
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !curl.handle; i++) {
        curl.handle = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    }
    if (!curl.handle) {
        snprintf(curl.reason, sizeof curl.reason, "libcurl not found (install libcurl4)");
        return;
    }
#define LOAD(field, symbol) curl.field = (void *)dlsym(curl.handle, symbol)
    LOAD(global_init, "curl_global_init");
    LOAD(easy_init, "curl_easy_init");
    LOAD(easy_setopt, "curl_easy_setopt");
    LOAD(easy_perform, "curl_easy_perform");
    LOAD(easy_getinfo, "curl_easy_getinfo");
    LOAD(easy_cleanup, "curl_easy_cleanup");
    LOAD(easy_strerror, "curl_easy_strerror");
    LOAD(slist_append, "curl_slist_append");
    LOAD(slist_free_all, "curl_slist_free_all");
#undef LOAD
    if (!curl.global_init || !curl.easy_init || !curl.easy_setopt || !curl.easy_perform || !curl.easy_getinfo ||
        !curl.easy_cleanup || !curl.easy_strerror || !curl.slist_append || !curl.slist_free_all) {
        snprintf(curl.reason, sizeof curl.reason, "libcurl lacks an expected function");
        dlclose(curl.handle);
        curl.handle = NULL;
        return;
    }
    curl.global_init(GLOBAL_DEFAULT);
}

int moose_curl_load(char *reason, size_t reason_size) {
    pthread_once(&load_once, load);
    if (!curl.handle && reason && reason_size) snprintf(reason, reason_size, "%s", curl.reason);
    return curl.handle != NULL;
}

typedef struct {
    unsigned char *data;
    size_t length, capacity, limit;
    int truncated;
} buffer;

static size_t append(buffer *b, const char *bytes, size_t count) {
    if (b->limit && b->length + count > b->limit) {
        b->truncated = 1;
        return 0;  // makes libcurl stop with CURLE_WRITE_ERROR
    }
    if (b->length + count + 1 > b->capacity) {
        size_t capacity = b->capacity ? b->capacity : 4096;
        while (capacity < b->length + count + 1) capacity *= 2;
        unsigned char *grown = realloc(b->data, capacity);
        if (!grown) return 0;
        b->data = grown;
        b->capacity = capacity;
    }
    memcpy(b->data + b->length, bytes, count);
    b->length += count;
    b->data[b->length] = 0;
    return count;
}

static size_t on_body(char *ptr, size_t size, size_t count, void *user) { return append(user, ptr, size * count); }
static size_t on_header(char *ptr, size_t size, size_t count, void *user) { return append(user, ptr, size * count); }

static int on_progress(void *user, int64_t dltotal, int64_t dlnow, int64_t ultotal, int64_t ulnow) {
    (void)dltotal; (void)dlnow; (void)ultotal; (void)ulnow;
    const int *cancel = user;
    return cancel && moose_cancel_flag_get(cancel) ? 1 : 0;  // non-zero aborts the transfer
}

int moose_curl_perform(const char *method, const char *url,
                       const char *const *headers, size_t header_count,
                       const unsigned char *body, size_t body_length,
                       long timeout_ms, long connect_timeout_ms, size_t max_body,
                       const int *cancel_flag, const char *ca_file, const char *pinned_public_key,
                       moose_curl_response *out) {
    memset(out, 0, sizeof *out);
    if (!moose_curl_load(out->error, sizeof out->error)) return -1;
    CURL *easy = curl.easy_init();
    if (!easy) {
        snprintf(out->error, sizeof out->error, "curl_easy_init failed");
        return -1;
    }
    buffer body_buffer = {0}, header_buffer = {0};
    body_buffer.limit = max_body;
    header_buffer.limit = 256 * 1024;
    struct curl_slist *list = NULL;
    for (size_t i = 0; i < header_count; i++) list = curl.slist_append(list, headers[i]);

    curl.easy_setopt(easy, OPT_URL, url);
    curl.easy_setopt(easy, OPT_PROTOCOLS, (long)(PROTO_HTTP | PROTO_HTTPS));
    curl.easy_setopt(easy, OPT_FOLLOWLOCATION, 0L);  // redirects are the caller's decision
    curl.easy_setopt(easy, OPT_NOSIGNAL, 1L);
    curl.easy_setopt(easy, OPT_TIMEOUT_MS, timeout_ms);
    curl.easy_setopt(easy, OPT_CONNECTTIMEOUT_MS, connect_timeout_ms);
    curl.easy_setopt(easy, OPT_WRITEFUNCTION, on_body);
    curl.easy_setopt(easy, OPT_WRITEDATA, &body_buffer);
    curl.easy_setopt(easy, OPT_HEADERFUNCTION, on_header);
    curl.easy_setopt(easy, OPT_HEADERDATA, &header_buffer);
    curl.easy_setopt(easy, OPT_NOPROGRESS, 0L);
    curl.easy_setopt(easy, OPT_XFERINFOFUNCTION, on_progress);
    curl.easy_setopt(easy, OPT_XFERINFODATA, (void *)cancel_flag);
    if (list) curl.easy_setopt(easy, OPT_HTTPHEADER, list);
    if (ca_file && *ca_file) curl.easy_setopt(easy, OPT_CAINFO, ca_file);  // trust these CAs instead of the system's
    if (pinned_public_key && *pinned_public_key) {
        // Pinning adds to verification, never replaces it: the chain and the name are still checked.
        curl.easy_setopt(easy, OPT_SSL_VERIFYPEER, 1L);
        curl.easy_setopt(easy, OPT_SSL_VERIFYHOST, 2L);
        if (curl.easy_setopt(easy, OPT_PINNEDPUBLICKEY, pinned_public_key) != 0) {
            // A libcurl (or TLS backend) without pinning: refuse rather than connect unpinned.
            snprintf(out->error, sizeof out->error, "this libcurl cannot pin public keys (CURLOPT_PINNEDPUBLICKEY)");
            if (list) curl.slist_free_all(list);
            curl.easy_cleanup(easy);
            return 4;  // CURLE_NOT_BUILT_IN
        }
    }
    char detail[256] = {0};  // CURL_ERROR_SIZE: libcurl's own words for the failure (which certificate check, …)
    curl.easy_setopt(easy, OPT_ERRORBUFFER, detail);
    if (strcmp(method, "HEAD") == 0) {
        curl.easy_setopt(easy, OPT_NOBODY, 1L);
    } else if (strcmp(method, "GET") != 0) {
        curl.easy_setopt(easy, OPT_CUSTOMREQUEST, method);
    }
    if (body) {
        curl.easy_setopt(easy, OPT_POSTFIELDSIZE_LARGE, (int64_t)body_length);
        curl.easy_setopt(easy, OPT_POSTFIELDS, (const char *)body);
    }
    int code = curl.easy_perform(easy);
    curl.easy_getinfo(easy, INFO_RESPONSE_CODE, &out->status);
    if (code != 0) {
        if (body_buffer.truncated) {
            snprintf(out->error, sizeof out->error, "response body larger than %zu bytes", max_body);
        } else if (cancel_flag && moose_cancel_flag_get(cancel_flag)) {
            snprintf(out->error, sizeof out->error, "cancelled");
        } else {
            snprintf(out->error, sizeof out->error, "%s", detail[0] ? detail : curl.easy_strerror(code));
        }
    }
    out->body = body_buffer.data;
    out->body_length = body_buffer.length;
    out->headers = (char *)header_buffer.data;
    out->headers_length = header_buffer.length;
    out->truncated = body_buffer.truncated;
    if (list) curl.slist_free_all(list);
    curl.easy_cleanup(easy);
    return code;
}

void moose_curl_response_free(moose_curl_response *response) {
    free(response->body);
    free(response->headers);
    response->body = NULL;
    response->headers = NULL;
}

void moose_cancel_flag_set(int *flag) { __atomic_store_n(flag, 1, __ATOMIC_RELEASE); }

int moose_cancel_flag_get(const int *flag) { return __atomic_load_n(flag, __ATOMIC_ACQUIRE); }
