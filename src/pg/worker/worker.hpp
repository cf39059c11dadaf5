#pragma once

#include "pg/base/postgres.hpp"

namespace wf::pg {

extern int sweep_interval_ms;  // GUC wf.sweep_interval
extern char* database_names;   // GUC wf.databases
extern int retention_seconds;  // GUC wf.retention; -1 keeps finished jobs

// Registers the launcher; from _PG_init while preloading.
void register_launcher_worker();

}  // namespace wf::pg
