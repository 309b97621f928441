#include <sqlite3.h>

/// `sqlite3_config` is variadic, which Swift cannot call: one typed wrapper per option used.
static inline int imgd_sqlite3_config_memstatus(int on) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, on);
}
