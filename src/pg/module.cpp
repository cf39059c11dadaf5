// Loading the library: settings, shared memory, the launcher.
#include "pg/base/args.hpp"
#include "pg/api/queue_settings.hpp"
#include "pg/jobs/release_rows.hpp"
#include "pg/runtime/metrics.hpp"
#include "pg/runtime/rate_windows.hpp"
#include "pg/runtime/shared_memory.hpp"
#include "pg/runtime/wakeup.hpp"
#include "pg/runtime/worker_registry.hpp"
#include "pg/worker/worker.hpp"

extern "C" {
#include "commands/dbcommands.h"
#include "utils/acl.h"
#include "tcop/utility.h"

PG_MODULE_MAGIC;
PGDLLEXPORT void _PG_init(void);
}

using namespace wf::pg;

namespace {

ProcessUtility_hook_type previous_utility_hook = nullptr;

// DROP DATABASE refuses while any session is connected, and the reaper is
// one: stop it first, as TimescaleDB does. Plain C-style code: no C++
// object lives in this frame, so an ereport from below may unwind it.
void on_utility(PlannedStmt* pstmt, const char* query, bool read_only_tree,
                ProcessUtilityContext context, ParamListInfo params, QueryEnvironment* env,
                DestReceiver* dest, QueryCompletion* qc) {
    Oid dropped = InvalidOid;
    if (IsA(pstmt->utilityStmt, DropdbStmt)) {
        DropdbStmt* stmt = reinterpret_cast<DropdbStmt*>(pstmt->utilityStmt);
        Oid database = get_database_oid(stmt->dbname, true);
        // Only for a DROP that can go ahead: else any role could keep the
        // reaper of a database off.
        if (OidIsValid(database) && pg_database_ownercheck(database, GetUserId()) &&
            !IsTransactionBlock()) {
            stop_database_worker(database);
            dropped = database;
        }
    }
    if (previous_utility_hook)
        previous_utility_hook(pstmt, query, read_only_tree, context, params, env, dest, qc);
    else
        standard_ProcessUtility(pstmt, query, read_only_tree, context, params, env, dest, qc);
    // Reached only when the DROP succeeded (an error leaves the hold-off
    // to expire): the database is gone, and so is its need of a slot.
    if (OidIsValid(dropped)) forget_dropped_database(dropped);
}

}  // namespace

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
        "wf.retention", "How long finished jobs are kept before the worker deletes them.",
        "Done, failed and cancelled jobs older than this are deleted in small batches, "
        "with their idempotency keys; -1 keeps them forever.",
        &retention_seconds, 7 * 24 * 3600, -1, INT_MAX, PGC_SIGHUP, GUC_UNIT_S, nullptr,
        nullptr, nullptr);
    DefineCustomIntVariable(
        "wf.default_lease",
        "Lease of a claim that names none, in a queue that has none (0: none).",
        "For clients behind a transaction-mode connection pooler, whose server session "
        "outlives them: set it for their role or database, so that their jobs come back "
        "when they stop heartbeating.",
        &default_lease_ms, 0, 0, 24 * 3600 * 1000, PGC_USERSET, GUC_UNIT_MS, nullptr, nullptr,
        nullptr);
    DefineCustomIntVariable(
        "wf.release_wait",
        "How long a completion waits for another transaction holding a dependent job "
        "before it leaves that job's release to the background worker (0: never waits).",
        "Only for a job that the completed jobs and at most one more still block: the "
        "holder is then most likely that other parent's completion, whose commit comes "
        "within a flush. In all per completion call; never under REPEATABLE READ.",
        &release_wait_ms, 10, 0, 10 * 1000, PGC_USERSET, GUC_UNIT_MS, nullptr, nullptr,
        nullptr);
    DefineCustomIntVariable(
        "wf.max_payload_size", "Largest payload, result or error text of one job.", nullptr,
        &max_payload_size, 1024 * 1024, 1, 256 * 1024 * 1024, PGC_SUSET, GUC_UNIT_BYTE,
        nullptr, nullptr, nullptr);
    // A size of shared memory: only the postmaster's load may define it
    // (loaded later, the library has no rate windows at all).
    if (process_shared_preload_libraries_in_progress)
        DefineCustomIntVariable(
            "wf.rate_limit_slots", "Rate-limit windows (a queue's, or one key's) kept at once.",
            "Each takes about 300 bytes of shared memory. A window whose period passed "
            "without a claim is reused; when all are in use, a claim that needs a new one "
            "takes nothing until one is free.",
            &rate_limit_slots, 1024, 16, 1000000, PGC_POSTMASTER, 0, nullptr, nullptr, nullptr);
    if (process_shared_preload_libraries_in_progress)
        DefineCustomIntVariable(
            "wf.metrics_slots", "Queues (of all databases) whose counters wf.metrics keeps.",
            "Each takes about 220 bytes of shared memory; the counts of queues beyond it "
            "are not kept.",
            &metrics_slots, 1024, 16, 1000000, PGC_POSTMASTER, 0, nullptr, nullptr, nullptr);
    MarkGUCPrefixReserved("wf");
    register_wakeup_callback();
    register_metrics_callback();

    if (!process_shared_preload_libraries_in_progress || IsBinaryUpgrade) return;
    request_shared_memory();
    register_launcher_worker();
    previous_utility_hook = ProcessUtility_hook;
    ProcessUtility_hook = on_utility;
}
