#ifndef MOOSE_CSQLITE_SHIM_H
#define MOOSE_CSQLITE_SHIM_H
#include <sqlite3.h>

// SQLITE_TRANSIENT is a macro casting -1 to a function pointer; Swift cannot import it.
static inline sqlite3_destructor_type moose_sqlite_transient(void) { return SQLITE_TRANSIENT; }

// SQLITE_STATIC is a macro casting 0 to a function pointer; Swift cannot import it.
static inline sqlite3_destructor_type moose_sqlite_static(void) { return SQLITE_STATIC; }

#endif
