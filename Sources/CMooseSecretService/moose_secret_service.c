#include "moose_secret_service.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

// libsecret's stable ABI (libsecret/secret-schema.h, secret-password.h; glib's GError), declared here
// so that nothing of libsecret or glib is needed to build.
typedef struct { const char *name; int type; } SecretSchemaAttribute;
typedef struct {
    const char *name;
    int flags;
    SecretSchemaAttribute attributes[32];
    int reserved;
    void *reserved1, *reserved2, *reserved3, *reserved4, *reserved5, *reserved6, *reserved7;
} SecretSchema;
typedef struct { unsigned int domain; int code; char *message; } GError;

enum { SECRET_SCHEMA_DONT_MATCH_NAME = 1 << 1, SECRET_SCHEMA_ATTRIBUTE_STRING = 0 };

// Matched on application and key only (not on the schema's name): an item put there by another
// client (secret-tool, Python's keyring, a provisioning script) is found too.
static const SecretSchema schema = {
    "dev.moose.MasterKey", SECRET_SCHEMA_DONT_MATCH_NAME,
    {{"application", SECRET_SCHEMA_ATTRIBUTE_STRING}, {"key", SECRET_SCHEMA_ATTRIBUTE_STRING}, {NULL, 0}},
    0, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
};

// The variadic calls take attribute name/value pairs ending with NULL.
typedef int (*fn_store_sync)(const SecretSchema *, const char *collection, const char *label, const char *password,
                             void *cancellable, GError **error, ...);
typedef char *(*fn_lookup_sync)(const SecretSchema *, void *cancellable, GError **error, ...);
typedef int (*fn_clear_sync)(const SecretSchema *, void *cancellable, GError **error, ...);
typedef void (*fn_password_free)(char *);
typedef void (*fn_error_free)(GError *);

static struct {
    void *handle;
    fn_store_sync store;
    fn_lookup_sync lookup;
    fn_clear_sync clear;
    fn_password_free password_free;
    fn_error_free error_free;
    char reason[200];
} lib;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void load(void) {
    const char *names[] = {"libsecret-1.so.0", "libsecret-1.so"};
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !lib.handle; i++) {
        lib.handle = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    }
    if (!lib.handle) {
        snprintf(lib.reason, sizeof lib.reason, "libsecret is not installed (libsecret-1.so.0; Debian: apt install libsecret-1-0)");
        return;
    }
    lib.store = (fn_store_sync)dlsym(lib.handle, "secret_password_store_sync");
    lib.lookup = (fn_lookup_sync)dlsym(lib.handle, "secret_password_lookup_sync");
    lib.clear = (fn_clear_sync)dlsym(lib.handle, "secret_password_clear_sync");
    lib.password_free = (fn_password_free)dlsym(lib.handle, "secret_password_free");
    // glib is libsecret's dependency: dlsym on its handle finds glib's symbols too.
    lib.error_free = (fn_error_free)dlsym(lib.handle, "g_error_free");
    if (!lib.store || !lib.lookup || !lib.clear || !lib.password_free || !lib.error_free) {
        snprintf(lib.reason, sizeof lib.reason, "libsecret lacks an expected function (a version before 0.18?)");
        dlclose(lib.handle);
        lib.handle = NULL;
    }
}

int moose_secret_service_load(char *reason, size_t reason_size) {
    pthread_once(&load_once, load);
    if (lib.handle) return 1;
    if (reason && reason_size) snprintf(reason, reason_size, "%s", lib.reason);
    return 0;
}

static void take_error(GError *error, char *out, size_t size) {
    if (out && size) snprintf(out, size, "%s", error && error->message ? error->message : "the Secret Service failed without a message");
    if (error) lib.error_free(error);
}

int moose_secret_service_lookup(const char *name, char **password, char *error, size_t error_size) {
    if (!moose_secret_service_load(error, error_size)) return -1;
    GError *failure = NULL;
    char *found = lib.lookup(&schema, NULL, &failure, "application", "moose", "key", name, (char *)NULL);
    if (failure) {
        if (found) lib.password_free(found);
        take_error(failure, error, error_size);
        return -1;
    }
    if (!found) return 0;
    *password = found;
    return 1;
}

int moose_secret_service_store(const char *name, const char *label, const char *password, char *error, size_t error_size) {
    if (!moose_secret_service_load(error, error_size)) return -1;
    GError *failure = NULL;
    // NULL collection: the default one ("login" on GNOME Keyring).
    int stored = lib.store(&schema, NULL, label, password, NULL, &failure, "application", "moose", "key", name, (char *)NULL);
    if (!stored || failure) {
        take_error(failure, error, error_size);
        return -1;
    }
    return 0;
}

int moose_secret_service_clear(const char *name, char *error, size_t error_size) {
    if (!moose_secret_service_load(error, error_size)) return -1;
    GError *failure = NULL;
    int removed = lib.clear(&schema, NULL, &failure, "application", "moose", "key", name, (char *)NULL);
    if (failure) {
        take_error(failure, error, error_size);
        return -1;
    }
    return removed ? 1 : 0;
}

void moose_secret_service_free(char *password) {
    if (password && lib.password_free) lib.password_free(password);
}
