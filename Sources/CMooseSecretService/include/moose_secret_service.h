#ifndef MOOSE_SECRET_SERVICE_H
#define MOOSE_SECRET_SERVICE_H

#include <stddef.h>

/// The freedesktop Secret Service through libsecret, loaded with dlopen on first use: a program that
/// never asks for it never loads it, and a machine without libsecret only loses this master-key source.
/// Items are kept under the schema "dev.moose.MasterKey" with the attributes application=moose and
/// key=NAME, in the default collection, and found by those two attributes alone (an item another
/// client stored with them is found too).

/// 1 if libsecret could be loaded (libsecret-1.so.0); 0 otherwise, with a reason.
int moose_secret_service_load(char *reason, size_t reason_size);

/// Looks up the item NAME. 1: found, *password is set (free it with moose_secret_service_free);
/// 0: there is none; -1: the Secret Service failed, with its message in error.
int moose_secret_service_lookup(const char *name, char **password, char *error, size_t error_size);

/// Stores PASSWORD (text) as the item NAME with LABEL, replacing one with the same attributes.
/// 0: stored; -1: failed, with the message in error.
int moose_secret_service_store(const char *name, const char *label, const char *password, char *error, size_t error_size);

/// Removes the item NAME. 1: removed; 0: there was none; -1: failed, with the message in error.
int moose_secret_service_clear(const char *name, char *error, size_t error_size);

/// Wipes and frees a password from moose_secret_service_lookup.
void moose_secret_service_free(char *password);

#endif
