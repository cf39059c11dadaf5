// Loading the library: settings, shared memory, the launcher.
#include "args.hpp"
#include "shared_state.hpp"
#include "worker.hpp"

extern "C" {
PG_MODULE_MAGIC;
PGDLLEXPORT void _PG_init(void);
}

using namespace wf::pg;

void _PG_init(void) {
    DefineCustomIntVariable(
        "wf.sweep_interval", "Time between two reaper passes of the background worker.",
        "Jobs of a session that exits are recovered at once; this pace bounds the "
        "recovery of expired leases and of sessions that vanished in a crash.",
        &sweep_interval_ms, 1000, 10, 3600 * 1000, PGC_SIGHUP, GUC_UNIT_MS, nullptr, nullptr,
        nullptr);
    DefineCustomStringVariable(
        "wf.databases", "Databases the pg_wf background worker serves (comma-separated).",
        "Empty: every database where the extension is created.", &database_names, "",
        PGC_SIGHUP, GUC_LIST_INPUT, nullptr, nullptr, nullptr);
    DefineCustomIntVariable(
        "wf.max_payload_size", "Largest payload, result or error text of one job.", nullptr,
        &max_payload_size, 1024 * 1024, 1, 256 * 1024 * 1024, PGC_SUSET, GUC_UNIT_BYTE,
        nullptr, nullptr, nullptr);
    MarkGUCPrefixReserved("wf");

    if (!process_shared_preload_libraries_in_progress || IsBinaryUpgrade) return;
    request_shared_memory();
    register_launcher_worker();
}
