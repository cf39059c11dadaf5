// The background workers: a launcher that starts one reaper per database
// where pg_wf is installed (or those named in wf.databases), and the reaper
// itself. Both start when recovery has finished, so they run only on a
// primary, again after a crash restart and on a promoted standby.
#include "pg/worker/worker.hpp"
#include "pg/api/schedule.hpp"
#include "pg/base/guard.hpp"
#include "pg/base/spi.hpp"
#include "pg/citus/shard_route.hpp"
#include "pg/jobs/dependencies.hpp"
#include "pg/jobs/job_state.hpp"
#include "pg/jobs/key_order.hpp"
#include "pg/runtime/extension.hpp"
#include "pg/runtime/run_as.hpp"
#include "pg/worker/reaper.hpp"
#include "pg/jobs/children.hpp"
#include "pg/worker/relay.hpp"
#include "pg/worker/retention.hpp"
#include "pg/runtime/worker_registry.hpp"

#include <cmath>
#include <map>
#include <optional>

extern "C" {
#include "access/heapam.h"
#include "access/htup_details.h"
#include "commands/dbcommands.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/pg_database.h"
#include "commands/vacuum.h"
#include "nodes/makefuncs.h"
#include "parser/parse_node.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/lmgr.h"
#include "postmaster/interrupt.h"
#include "tcop/tcopprot.h"
#include "utils/varlena.h"
}

namespace wf::pg {

int sweep_interval_ms = 1000;
int retention_seconds = 7 * 24 * 3600;
char* database_names = nullptr;

namespace {

// A database found without pg_wf is checked again after this long, or at
// once when CREATE EXTENSION or a first claim there wakes the launcher.
constexpr long kRecheckWithoutExtensionMs = 60 * 1000;
constexpr long kLauncherNaptimeMs = 1000;

struct KnownDatabase {
    Oid oid;
    char name[NAMEDATALEN];
};

bool database_allowed(const char* name) {
    if (database_names == nullptr || database_names[0] == '\0') return true;
    char* copy = pstrdup(database_names);
    List* names = nullptr;
    bool allowed = false;
    if (SplitIdentifierString(copy, ',', &names)) {
        ListCell* cell;
        foreach (cell, names)
            if (strcmp(static_cast<char*>(lfirst(cell)), name) == 0) allowed = true;
    } else {
        ereport(LOG, (errmsg("pg_wf: wf.databases is not a valid list of database names")));
    }
    list_free(names);
    pfree(copy);
    return allowed;
}

// Databases that accept connections; read from the shared catalog, as
// autovacuum does, since the launcher is connected to no database.
std::vector<KnownDatabase> list_databases() {
    std::vector<KnownDatabase> found;
    SetCurrentStatementStartTimestamp();
    StartTransactionCommand();
    Relation rel = table_open(DatabaseRelationId, AccessShareLock);
    TableScanDesc scan = table_beginscan_catalog(rel, 0, nullptr);
    HeapTuple tuple;
    while ((tuple = heap_getnext(scan, ForwardScanDirection)) != nullptr) {
        Form_pg_database db = reinterpret_cast<Form_pg_database>(GETSTRUCT(tuple));
        if (!db->datallowconn || db->datistemplate) continue;
        if (!database_allowed(NameStr(db->datname))) continue;
        KnownDatabase known;
        known.oid = db->oid;
        strlcpy(known.name, NameStr(db->datname), NAMEDATALEN);
        found.push_back(known);
    }
    table_endscan(scan);
    table_close(rel, AccessShareLock);
    CommitTransactionCommand();
    return found;
}

struct Started {
    Oid database;
    BackgroundWorkerHandle* handle;
};

bool start_database_worker(Oid database, BackgroundWorkerHandle** handle) {
    BackgroundWorker worker;
    memset(&worker, 0, sizeof worker);
    worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
    worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
    worker.bgw_restart_time = BGW_NEVER_RESTART;  // the launcher restarts it
    strlcpy(worker.bgw_library_name, "pg_wf", BGW_MAXLEN);
    strlcpy(worker.bgw_function_name, "wf_database_worker_main", BGW_MAXLEN);
    snprintf(worker.bgw_name, BGW_MAXLEN, "pg_wf reaper for database %u", database);
    strlcpy(worker.bgw_type, "pg_wf reaper", BGW_MAXLEN);
    worker.bgw_main_arg = ObjectIdGetDatum(database);
    worker.bgw_notify_pid = MyProcPid;
    return RegisterDynamicBackgroundWorker(&worker, handle);
}

// No error handler here, on purpose: an ERROR in the launcher becomes FATAL
// (no PG_exception_stack), so nothing unwinds the C++ objects below; the
// postmaster restarts the launcher a second later (bgw_restart_time).
void launcher_loop() {
    std::vector<Started> started;
    bool warned_no_slot = false;
    for (;;) {
        CHECK_FOR_INTERRUPTS();
        if (ConfigReloadPending) {
            ConfigReloadPending = false;
            ProcessConfigFile(PGC_SIGHUP);
        }
        bool requested = take_launcher_request();
        TimestampTz now = GetCurrentTimestamp();
        for (const KnownDatabase& db : list_databases()) {
            auto it = std::find_if(started.begin(), started.end(),
                                   [&](const Started& s) { return s.database == db.oid; });
            if (it != started.end()) {
                pid_t pid;
                if (GetBackgroundWorkerPid(it->handle, &pid) != BGWH_STOPPED) continue;
                pfree(it->handle);
                started.erase(it);
            }
            if (database_being_dropped(db.oid)) continue;
            TimestampTz checked_at = 0;
            if (database_lacks_extension(db.oid, &checked_at) && !requested &&
                !TimestampDifferenceExceeds(checked_at, now, kRecheckWithoutExtensionMs))
                continue;
            BackgroundWorkerHandle* handle = nullptr;
            if (!start_database_worker(db.oid, &handle)) {
                if (!warned_no_slot)
                    ereport(WARNING,
                            (errmsg("pg_wf: no background worker slot for database \"%s\"",
                                    db.name),
                             errhint("Raise max_worker_processes: pg_wf needs one per "
                                     "database where it is installed, plus its launcher.")));
                warned_no_slot = true;
                continue;
            }
            started.push_back({db.oid, handle});
        }
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
                        kLauncherNaptimeMs, PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
    }
}

// The SQLSTATE of the last pass that failed (the relay's deferral asks).
int failed_pass_code = 0;

// After an ERROR in the worker: log it, roll back, and go on.
void report_error_and_roll_back() {
    HOLD_INTERRUPTS();
    failed_pass_code = geterrcode();
    EmitErrorReport();
    AbortCurrentTransaction();
    FlushErrorState();
    MemoryContextSwitchTo(TopMemoryContext);
    RESUME_INTERRUPTS();
}

// Every relation a pass may touch, locked up front without waiting. A pass
// that waited for one of them while holding others could deadlock with a
// DROP EXTENSION or a multi-table TRUNCATE, which lock them one by one in
// their own order; instead the pass is skipped and runs again later.
bool lock_relations_without_waiting() {
    static const char* const relations[] = {
        "job", "job_id_seq", "ready", "claim", "dependency", "queue_config",
        // since 1.1
        "release_debt", "checkpoint", "workflow", "event", "event_wait", "schedule",
        // since 1.8
        "outbox", "remote_dependent", "remote_input"};
    Oid schema = get_namespace_oid("wf", true);
    if (!OidIsValid(schema)) return false;
    for (const char* name : relations) {
        Oid relation = get_relname_relid(name, schema);
        if (OidIsValid(relation) && !ConditionalLockRelationOid(relation, RowExclusiveLock))
            return false;
    }
    return true;
}

enum class PassKind {
    // C++ run through run_guarded inside SPI, with a snapshot, once every
    // relation it may touch is locked without waiting.
    sql,
    // Plain C-style code that commits and starts transactions itself
    // (VACUUM): no snapshot, no SPI, no relation locked before; an ereport
    // from it unwinds no C++ object.
    vacuum,
};

// What run_guarded runs for a PassKind::sql pass: its body, inside SPI, as
// pg_wf's owner (run_as.hpp): the worker connects as a superuser, but what
// it runs has no more rights than pg_wf's own functions.
template <typename Body>
void run_body_in_spi(void* body) {
    RunAsOwner as_owner(pg_wf_owner());
    with_spi(*static_cast<Body*>(body));
}

// One pass of the worker in a transaction of its own. An ERROR in it (a
// deadlock, a cancelled statement, a bad row) is logged and its transaction
// rolled back, and the worker goes on with the next pass, as autovacuum goes
// on with the next table. No C++ object lives in this frame or between it
// and the body's guard (`body` is a function, or a lambda capturing by
// reference). Returns whether the pass committed.
template <PassKind kind = PassKind::sql, typename Body>
bool run_pass(const char* activity, Body&& body) {
    SetCurrentStatementStartTimestamp();
    StartTransactionCommand();
    volatile bool committed = false;
    PG_TRY();
    {
        pgstat_report_activity(STATE_RUNNING, activity);
        if constexpr (kind == PassKind::vacuum) {
            body();
        } else {
            PushActiveSnapshot(GetTransactionSnapshot());
            if (lock_relations_without_waiting())
                run_guarded(run_body_in_spi<std::remove_reference_t<Body>>, &body);
            PopActiveSnapshot();
        }
        CommitTransactionCommand();
        committed = true;
    }
    PG_CATCH();
    {
        report_error_and_roll_back();
    }
    PG_END_TRY();
    pgstat_report_activity(STATE_IDLE, nullptr);
    return committed;
}

void on_worker_exit(int, Datum) { unregister_database_worker(false); }

char database_name[NAMEDATALEN] = "";
bool announced = false;
// Why the worker leaves the database alone ("" while it serves it), and
// what it last said about that in the log.
char refusal[256] = "";
char told[256] = "";

// pg_wf was dropped from this database: the worker leaves, and the launcher
// starts another here only once it is created again.
[[noreturn]] void leave_database() {
    CommitTransactionCommand();
    cancel_before_shmem_exit(on_worker_exit, 0);
    unregister_database_worker(true);
    if (announced)
        ereport(LOG, (errmsg("pg_wf reaper stopped: extension dropped from database \"%s\"",
                             database_name)));
    proc_exit(0);
}

void read_refusal(void*) {
    std::string why = schema_refusal();
    strlcpy(refusal, why.c_str(), sizeof refusal);
}

// Once per loop, before its passes: whether they may run. The worker leaves
// a database where pg_wf was dropped, and leaves one alone whose schema is
// older than the library (until ALTER EXTENSION pg_wf UPDATE) or whose
// tables have something attached (attachments.hpp). The answer is cached
// until a catalog change, so a database served costs no catalog read.
bool extension_served() {
    SetCurrentStatementStartTimestamp();
    StartTransactionCommand();
    if (database_name[0] == '\0') {
        char* name = get_database_name(MyDatabaseId);
        strlcpy(database_name, name ? name : "?", NAMEDATALEN);
    }
    run_guarded(read_refusal, nullptr);
    bool current = refusal[0] == '\0';
    if (!current && !OidIsValid(get_extension_oid("pg_wf", true))) leave_database();
    if (!announced) {
        ereport(LOG, (errmsg("pg_wf reaper started for database \"%s\"", database_name)));
        announced = true;
    }
    if (strcmp(refusal, told) != 0) {
        if (!current)
            ereport(LOG, (errmsg("pg_wf worker: database \"%s\": %s; nothing is done there until "
                                 "that changes",
                                 database_name, refusal)));
        strlcpy(told, refusal, sizeof told);
    }
    CommitTransactionCommand();
    return current;
}

// Every claim scans wf.ready's index from the start of its queue, and the
// rows claims deleted stay in it, dead, until a vacuum: at thousands of
// claims per second between two visits of autovacuum (autovacuum_naptime,
// a minute by default), each claim steps over pages of them -- measured:
// 200 index pages per claim, a fifth of its CPU. wf.claim is the same: a
// row per attempt, deleted when it ends, and the completion's lookups
// step over the dead ones. So the worker vacuums both tables itself once
// enough rows died since it last did: kHotVacuumMinDead, or the square
// root of the live rows if more (a vacuum reads the whole index, so a
// large backlog waits for a few more; each claim would step over them
// all). SKIP_LOCKED: never waits for autovacuum, a TRUNCATE or DROP
// EXTENSION; no truncation, which would take an exclusive lock.
constexpr int64 kHotVacuumMinDead = 1000;

// What the last vacuum of a table could not remove (an old snapshot).
struct DeadLeft {
    int64 ready = 0;
    int64 claim = 0;
};
DeadLeft dead_left;

// The body of a PassKind::vacuum pass: wf.<name>, or on a distributed
// pg_wf one of this node's shards of it (each with its own count).
void vacuum_hot_table(const char* name, int64* dead_left) {
    Oid schema = get_namespace_oid("wf", true);
    Oid table = OidIsValid(schema) ? get_relname_relid(name, schema) : InvalidOid;
    PgStat_StatTabEntry* stats = OidIsValid(table) ? pgstat_fetch_stat_tabentry(table) : nullptr;
    if (stats == nullptr) return;
    int64 died = stats->n_dead_tuples - *dead_left;
    double live = static_cast<double>(std::max<int64>(stats->n_live_tuples, 0));
    if (died < kHotVacuumMinDead || static_cast<double>(died) < std::sqrt(live)) return;
    VacuumStmt* stmt = makeNode(VacuumStmt);
    stmt->options = list_make4(makeDefElem(pstrdup("skip_locked"), (Node*)makeString(pstrdup("on")), -1),
                               makeDefElem(pstrdup("index_cleanup"), (Node*)makeString(pstrdup("on")), -1),
                               makeDefElem(pstrdup("truncate"), (Node*)makeString(pstrdup("off")), -1),
                               makeDefElem(pstrdup("process_toast"), (Node*)makeString(pstrdup("off")), -1));
    // By OID and without a name: a relation skipped as locked is
    // skipped silently (a name would log a WARNING each time).
    stmt->rels = list_make1(makeVacuumRelation(nullptr, table, NIL));
    stmt->is_vacuumcmd = true;
    // Commits the transaction, vacuums in one of its own, and starts
    // another for the pass's commit.
    ExecVacuum(make_parsestate(nullptr), stmt, true);
    pgstat_clear_snapshot();
    stats = pgstat_fetch_stat_tabentry(table);
    *dead_left = stats ? stats->n_dead_tuples : 0;
}

// Small batches, one per sweep and short transactions: retention never
// holds long locks nor competes with claims for long.
constexpr int kRetentionBatch = 1000;
int64 retention_cursor = 0;

// On a distributed pg_wf (citus/shard_route.hpp) each node's worker serves
// the shard groups placed on it, each pass once per group, named by its
// shard of wf.job; what a group's passes keep between sweeps is here.
struct LocalGroup {
    int64 retention_cursor = 0;
    std::string ready_name;  // its shards of wf.ready and wf.claim
    std::string claim_name;
    DeadLeft dead_left;
};
std::map<int64, LocalGroup> local_groups;
bool served_distributed = false;  // what the last full pass found

void log_recovered(int64 recovered) {
    if (recovered > 0)
        ereport(LOG, (errmsg("pg_wf reaper recovered %lld job%s of lost workers in database \"%s\"",
                             static_cast<long long>(recovered), recovered == 1 ? "" : "s",
                             database_name)));
}

// A pass over one local shard group (shard_route.hpp): its statements name
// the group's shards; a group moved away since it was listed is skipped.
template <typename Body>
void run_group_pass(const char* activity, int64 shard, Body&& body) {
    run_pass(activity, [&] {
        ShardRoute route(shard);
        if (!route.moved()) body();
    });
}

// One batch of retention, over wf.job or over one local shard group.
void retention_pass(int64* cursor, std::optional<int64> shard = std::nullopt) {
    if (retention_seconds < 0) return;
    int64 deleted = 0;
    auto expire = [&] { deleted = expire_finished_jobs(cursor, retention_seconds, kRetentionBatch); };
    if (shard)
        run_group_pass("pg_wf retention", *shard, expire);
    else
        run_pass("pg_wf retention", expire);
    if (deleted > 0)
        ereport(DEBUG1, (errmsg("pg_wf deleted %lld finished jobs past wf.retention",
                                static_cast<long long>(deleted))));
}

// Releases completions left to the worker (dependencies inside the group).
void settle_group_releases(int64 shard) {
    run_group_pass("pg_wf releases", shard, [] { settle_release_debts(); });
}

// The passes of run_full_pass for each local shard group, and the
// releases completions left.
void run_group_passes(const std::vector<int64>& shards) {
    std::map<int64, LocalGroup> seen;
    int64 recovered = 0;
    for (int64 shard : shards) {
        LocalGroup& group = seen[shard];
        auto known = local_groups.find(shard);
        if (known != local_groups.end()) group = known->second;
        run_group_pass("pg_wf sweep", shard, [&] {
            recovered += sweep_database();
            group.ready_name = "ready" + current_shard_group()->ready_suffix;
            group.claim_name = "claim" + current_shard_group()->claim_suffix;
        });
        // Timeouts, and waits whose event was signalled while they were
        // coming in (steps.cpp, read_event_copy).
        run_group_pass("pg_wf timeouts", shard, [] {
            wake_waiting_jobs(std::nullopt, std::nullopt);
            wake_signalled_jobs();
        });
        retention_pass(&group.retention_cursor, shard);
        settle_group_releases(shard);
        if (!group.ready_name.empty()) {
            run_pass<PassKind::vacuum>("pg_wf: VACUUM wf.ready", [&] {
                vacuum_hot_table(group.ready_name.c_str(), &group.dead_left.ready);
            });
            run_pass<PassKind::vacuum>("pg_wf: VACUUM wf.claim", [&] {
                vacuum_hot_table(group.claim_name.c_str(), &group.dead_left.claim);
            });
        }
    }
    local_groups = std::move(seen);
    log_recovered(recovered);
}

// What calls left for other shard groups in wf.outbox (a distributed
// pg_wf, 1.8), an entry per transaction: one that fails (a node down) is
// logged and deferred (defer_failed_entry), and the pass goes on with the
// others.
void relay_outbox() {
    constexpr int kRelayBatch = 1000;
    for (int i = 0; i < kRelayBatch; i++) {
        bool relayed = false;
        int64 taken = 0;
        bool committed = run_pass("pg_wf relay", [&] {
            if (schema_at_least("1.8")) relayed = relay_one_entry(&taken);
        });
        if (!committed && taken != 0) {
            if (defer_failed_entry(taken, failed_pass_code))
                run_pass("pg_wf relay diagnosis", [] { log_citus_nodes(); });
            continue;
        }
        if (!committed || !relayed) return;
    }
    // More than a batch: the rest at the next pass.
}

// Releases completions left, group by group (between full passes), and
// the outbox.
void settle_group_releases() {
    for (const auto& entry : local_groups) settle_group_releases(entry.first);
    relay_outbox();
}

// Every wf.sweep_interval: recovery, then event timeouts and cron ticks, each
// in a pass of its own (a schedule that cannot fire, a hand-edited row, holds
// back neither the timeouts nor the passes after it), retention and the
// vacuum of the ready set.
void run_full_pass() {
    bool citus = false, looked = false;
    std::vector<int64> shards;
    run_pass("pg_wf shards", [&] {
        citus = distributed();
        if (citus) {
            shards = local_job_shards();
            forget_groups_elsewhere(shards);
        }
        looked = true;
    });
    // Not knowing whether pg_wf is distributed, nothing is run: on Citus a
    // pass over the distributed tables would judge other nodes' owners by
    // this node's locks.
    if (!looked) return;
    served_distributed = citus;
    if (citus) {
        run_group_passes(shards);
        relay_outbox();
        // Schedules fire once cluster-wide: the coordinator's worker fires
        // them (fire_due_schedules does nothing on the other nodes).
        run_pass("pg_wf cron", [] { fire_due_schedules(); });
        // And the events retention leaves behind, in every node's copy.
        if (retention_seconds >= 0)
            run_pass("pg_wf retention", [] {
                if (on_coordinator()) expire_cluster_events(retention_seconds, kRetentionBatch);
            });
        return;
    }
    int64 recovered = 0;
    run_pass("pg_wf sweep", [&] { recovered = sweep_database(); });
    run_pass("pg_wf timeouts", [] { wake_waiting_jobs(std::nullopt, std::nullopt); });
    run_pass("pg_wf cron", [] { fire_due_schedules(); });
    run_pass("pg_wf key order", [] {
        if (schema_at_least("1.10")) sweep_key_order();
    });
    retention_pass(&retention_cursor);
    run_pass<PassKind::vacuum>("pg_wf: VACUUM wf.ready",
                               [] { vacuum_hot_table("ready", &dead_left.ready); });
    run_pass<PassKind::vacuum>("pg_wf: VACUUM wf.claim",
                               [] { vacuum_hot_table("claim", &dead_left.claim); });
    log_recovered(recovered);
}

// Debts on a child held by another transaction are tried again this soon
// (doubling while they stay), rather than at the next full pass.
constexpr long kReleaseRetryFirstMs = 2;
long release_retry_ms = 0;  // 0: no retry scheduled
TimestampTz release_retry_at = 0;

// Releases left by completions (see release_dependents). A debt whose child
// is gone is left for retention to remove.
void settle_releases(TimestampTz now) {
    bool left = false;
    run_pass("pg_wf releases", [&] {
        settle_release_debts(&left);
        // Outcomes of child workflows whose parent another transaction held.
        settle_undelivered_children();
    });
    if (!left) {
        release_retry_ms = 0;
        return;
    }
    release_retry_ms = release_retry_ms == 0
                           ? kReleaseRetryFirstMs
                           : std::min<long>(release_retry_ms * 2, sweep_interval_ms);
    release_retry_at = TimestampTzPlusMilliseconds(now, release_retry_ms);
}

// Sleeps until the next full pass or release retry, or a wake-up.
void wait_for_work(TimestampTz next_full_pass) {
    TimestampTz until = next_full_pass;
    if (release_retry_ms > 0 && release_retry_at < until) until = release_retry_at;
    long timeout_ms = static_cast<long>((until - GetCurrentTimestamp()) / 1000);
    if (timeout_ms <= 0) return;
    (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, timeout_ms,
                    PG_WAIT_EXTENSION);
    ResetLatch(MyLatch);
}

}  // namespace
}  // namespace wf::pg

using namespace wf::pg;

extern "C" PGDLLEXPORT void wf_launcher_main(Datum) {
    pqsignal(SIGHUP, SignalHandlerForConfigReload);
    pqsignal(SIGTERM, die);
    BackgroundWorkerUnblockSignals();
    BackgroundWorkerInitializeConnection(nullptr, nullptr, 0);
    pgstat_report_appname("pg_wf launcher");
    register_launcher();
    ereport(LOG, (errmsg("pg_wf launcher started")));
    launcher_loop();
}

extern "C" PGDLLEXPORT void wf_database_worker_main(Datum main_arg) {
    Oid database = DatumGetObjectId(main_arg);
    pqsignal(SIGHUP, SignalHandlerForConfigReload);
    pqsignal(SIGTERM, die);
    BackgroundWorkerUnblockSignals();
    BackgroundWorkerInitializeConnectionByOid(database, InvalidOid, 0);
    pgstat_report_appname("pg_wf reaper");
    // As for the SQL functions (see the install script): index plans only.
    SetConfigOption("enable_seqscan", "off", PGC_SUSET, PGC_S_OVERRIDE);
    // And no JIT: a plan that keeps a disabled sequential scan costs over
    // 1e10 and would be compiled on every pass.
    SetConfigOption("jit", "off", PGC_SUSET, PGC_S_OVERRIDE);
    // Names resolve in pg_catalog only, whatever the database's or a role's
    // search_path says: a function or operator someone planted in another
    // schema must never be what the worker's SQL calls.
    SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_OVERRIDE);
    // No user transaction holds a pass for long: a row lock it keeps (an
    // open transaction that locked a job) ends the pass after this, logged,
    // and the next pass tries again; the recovery itself skips such rows.
    SetConfigOption("lock_timeout", "1s", PGC_SUSET, PGC_S_OVERRIDE);
    register_database_worker(database);
    before_shmem_exit(on_worker_exit, 0);

    // An error that no pass caught (in the check of the extension, or in
    // starting a pass's transaction) is logged and the loop goes on after
    // wf.sweep_interval, as autovacuum does; without this, ERROR would end
    // the worker. Nothing between here and any ereport owns a C++ object
    // (the passes run their bodies through run_guarded).
    sigjmp_buf recover;
    if (sigsetjmp(recover, 1) != 0) {
        report_error_and_roll_back();
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
                        sweep_interval_ms, PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
    }
    PG_exception_stack = &recover;

    // Static: it outlives a longjmp to `recover`.
    static TimestampTz next_full_pass = 0;
    for (;;) {
        CHECK_FOR_INTERRUPTS();
        if (ConfigReloadPending) {
            ConfigReloadPending = false;
            ProcessConfigFile(PGC_SIGHUP);
        }
        // A full pass every wf.sweep_interval, or at once when a session
        // with claims ended; in between, the releases completions left.
        bool sweep_requested = false, releases_requested = false;
        take_worker_requests(&sweep_requested, &releases_requested);
        TimestampTz now = GetCurrentTimestamp();
        bool full_pass = sweep_requested || now >= next_full_pass;
        bool releases_due = releases_requested || (release_retry_ms > 0 && now >= release_retry_at);
        if (full_pass) next_full_pass = TimestampTzPlusMilliseconds(now, sweep_interval_ms);
        if (full_pass || releases_due) {
            if (extension_served()) {
                if (full_pass) run_full_pass();
                if (!served_distributed)
                    settle_releases(now);
                else if (!full_pass)
                    settle_group_releases();
            } else {
                release_retry_ms = 0;  // nothing is retried in a database left alone
            }
        }
        wait_for_work(next_full_pass);
    }
}

void wf::pg::register_launcher_worker() {
    BackgroundWorker worker;
    memset(&worker, 0, sizeof worker);
    worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
    worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
    worker.bgw_restart_time = 1;
    strlcpy(worker.bgw_library_name, "pg_wf", BGW_MAXLEN);
    strlcpy(worker.bgw_function_name, "wf_launcher_main", BGW_MAXLEN);
    strlcpy(worker.bgw_name, "pg_wf launcher", BGW_MAXLEN);
    strlcpy(worker.bgw_type, "pg_wf launcher", BGW_MAXLEN);
    RegisterBackgroundWorker(&worker);
}
