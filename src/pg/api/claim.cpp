// wf_claim and wf_heartbeat: taking jobs and keeping them.
#include <optional>

#include "core/error.hpp"
#include "core/validation.hpp"
#include "pg/base/args.hpp"
#include "pg/jobs/job_state.hpp"
#include "pg/jobs/queue_settings.hpp"
#include "pg/jobs/ready_set.hpp"
#include "pg/runtime/ownership.hpp"
#include "pg/runtime/shared_memory.hpp"
#include "pg/runtime/wakeup.hpp"

namespace wf::pg {
namespace {

// With max_running set, claimers of the queue take turns on its config row,
// so that the running count they read cannot be outdated by a racing claim.
PreparedStatement lock_queue_config(
    "SELECT max_running FROM wf.queue_config WHERE queue = $1 FOR UPDATE", {TEXTOID});

PreparedStatement count_running(
    "SELECT count(*) FROM wf.claim c JOIN wf.job j ON j.queue = $1 AND j.id = c.id"
    " WHERE c.queue = $1 AND j.attempt + 1 = c.attempt AND j.status = 'pending'",
    {TEXTOID});

// After the ready rows are taken (ready_set.cpp), one statement: record the
// attempt, its owner and lease in the unlogged claim table, and read the
// jobs. The job row is only read: removing the ready row is all a claim
// writes to WAL (see pg_wf--1.1--1.2.sql). The queue is named in every
// reference to a job table, so the statement can be routed by queue.
PreparedStatement claim_jobs(
    "WITH picked AS ("
    "  SELECT * FROM unnest($7::bigint[], $8::int[], $9::timestamptz[]) AS p(id, priority, run_at)),"
    // A ready row's key is its job's own priority and run_at; a row that
    // does not match (none should) is used up without handing the job out.
    " claimed AS ("
    "  SELECT j.id, j.attempt + 1 AS attempt"
    "    FROM wf.job j JOIN picked ON j.queue = $1 AND j.id = picked.id"
    "     AND j.priority = picked.priority AND j.run_at = picked.run_at"
    "   WHERE j.status = 'pending'),"
    " owned AS ("
    "  INSERT INTO wf.claim (queue, id, attempt, owner_session, lease, lease_expires_at,"
    "                        worker, owner_pid, started_at)"
    "  SELECT $1, id, attempt, $3, $5, $6 + $5, $2, $4, $6 FROM claimed"
    // A row some earlier attempt left behind is replaced; one of this
    // attempt is never: the claim row is what makes an attempt number
    // one owner's, and a job it would hand out twice is not handed out.
    "  ON CONFLICT (queue, id) DO UPDATE SET attempt = excluded.attempt,"
    "     owner_session = excluded.owner_session, lease = excluded.lease,"
    "     lease_expires_at = excluded.lease_expires_at, worker = excluded.worker,"
    "     owner_pid = excluded.owner_pid, started_at = excluded.started_at"
    "   WHERE wf.claim.attempt < excluded.attempt"
    "  RETURNING id, attempt)"
    // The jobs are read again by key (the same snapshot): joining the two
    // CTEs instead would compare every claimed row with every owned one.
    " SELECT j.id, o.attempt, j.queue, j.payload, j.workflow_id, j.step_name, j.priority,"
    "        j.max_attempts, j.idempotency_key,"
    // The results of the jobs it depended on, keyed by step name (or id).
    "        CASE WHEN j.depends_on IS NOT NULL THEN"
    "          (SELECT jsonb_object_agg(coalesce(p.step_name, p.id::text),"
    "                                   coalesce(p.result, 'null'))"
    "             FROM wf.job p WHERE p.id = ANY (j.depends_on)) END,"
    "        $6 + $5,"
    // Checkpoints of earlier attempts (a first claim has none to look for).
    "        CASE WHEN o.attempt > 1 THEN"
    "          (SELECT jsonb_object_agg(k.step, coalesce(k.output, 'null'))"
    "             FROM wf.checkpoint k WHERE k.queue = $1 AND k.job_id = j.id) END,"
    "        j.events, j.run_at"
    "   FROM owned o JOIN wf.job j ON j.queue = $1 AND j.id = o.id",
    {TEXTOID, TEXTOID, INT8OID, INT4OID, INTERVALOID, TIMESTAMPTZOID, INT8ARRAYOID,
     INT4ARRAYOID, TIMESTAMPTZARRAYOID});

// When the next scheduled job of the queue becomes due, to bound a wait.
PreparedStatement next_due(
    "SELECT min(run_at) FROM wf.ready WHERE queue = $1 AND run_at > $2",
    {TEXTOID, TIMESTAMPTZOID});

PreparedStatement read_claim(
    "SELECT c.lease, j.cancel_requested FROM wf.job j, wf.claim c WHERE " WF_TOKEN_HOLDS,
    {TEXTOID, INT8OID, INT4OID});

// Leases live in the unlogged claim table: a renewal writes no WAL.
PreparedStatement extend_lease(
    "UPDATE wf.claim SET lease = $4, lease_expires_at = $5 + $4"
    " WHERE queue = $1 AND id = $2 AND attempt = $3",
    {TEXTOID, INT8OID, INT4OID, INTERVALOID, TIMESTAMPTZOID});

constexpr int kColumns = 13;  // of wf_claim's result

struct ClaimedRow {
    Datum values[kColumns];
    bool nulls[kColumns];
    int32 priority;
    TimestampTz run_at;
    int64 id;
};

struct ClaimRequest {
    Datum queue;
    Datum worker;
    int max_jobs;
    Interval* lease;  // nullptr: the queue's lease, if any
};

// Wakes a waiting claimer at most this often without shared memory
// (pg_wf not preloaded), where commits cannot set its latch.
constexpr long kPollWithoutSharedMemoryMs = 100;

// How many jobs this claim may take (0 when paused or at max_running), and
// the lease to give them (the claim's, else the queue's).
int claim_limit(const ClaimRequest& req, Interval* lease, bool* has_lease) {
    QueueSettings settings = queue_settings(req.queue);
    *has_lease = req.lease != nullptr || settings.has_lease;
    if (req.lease)
        *lease = *req.lease;
    else if (settings.has_lease)
        *lease = settings.lease;
    if (settings.paused) return 0;
    if (!settings.has_max_running) return req.max_jobs;

    Params<1> q;
    q.set(0, req.queue);
    if (lock_queue_config.execute(q.values, q.nulls) == 0 || column_is_null(0, 1))
        return req.max_jobs;
    int64 max_running = column_int32(0, 1);
    count_running.execute(q.values, q.nulls);
    int64 room = max_running - column_int64(0, 1);
    return static_cast<int>(std::clamp<int64>(room, 0, req.max_jobs));
}

std::vector<ClaimedRow> claim_once(const ClaimRequest& req) {
    std::vector<ClaimedRow> rows;
    Interval lease{};
    bool has_lease = false;
    int limit = claim_limit(req, &lease, &has_lease);
    if (limit <= 0) return rows;

    Datum now = clock_now();
    std::vector<ReadyRow> ready = take_ready_rows(req.queue, DatumGetTimestampTz(now), limit);
    if (ready.empty()) return rows;
    std::vector<Datum> ids, priorities, run_ats;
    for (const ReadyRow& r : ready) {
        ids.push_back(Int64GetDatum(r.id));
        priorities.push_back(Int32GetDatum(r.priority));
        run_ats.push_back(TimestampTzGetDatum(r.run_at));
    }
    std::vector<bool> no_nulls(ready.size(), false);

    Params<9> p;
    p.set(0, req.queue);
    p.set(1, req.worker);
    p.set(2, Int64GetDatum(session_owner_key()));
    p.set(3, Int32GetDatum(MyProcPid));
    if (has_lease) p.set(4, IntervalPGetDatum(&lease)); else p.set_null(4);
    p.set(5, now);
    p.set(6, datum_array(ids, no_nulls, INT8OID));
    p.set(7, datum_array(priorities, no_nulls, INT4OID));
    p.set(8, datum_array(run_ats, no_nulls, TIMESTAMPTZOID));
    uint64 n = claim_jobs.execute(p.values, p.nulls);
    SPITupleTable* claimed = SPI_tuptable;
    if (n == 0) {
        // An empty claim in a long wait: nothing to keep until SPI_finish.
        call([&] { SPI_freetuptable(claimed); });
        return rows;
    }
    rows.resize(n);
    for (uint64 r = 0; r < n; r++) {
        ClaimedRow& row = rows[r];
        HeapTuple tuple = claimed->vals[r];
        TupleDesc desc = claimed->tupdesc;
        // The statement's first kColumns columns are wf_claim's result.
        for (int c = 0; c < kColumns; c++)
            row.values[c] = SPI_getbinval(tuple, desc, c + 1, &row.nulls[c]);
        bool isnull;
        row.id = DatumGetInt64(row.values[0]);
        row.priority = DatumGetInt32(row.values[6]);
        row.run_at = DatumGetTimestampTz(SPI_getbinval(tuple, desc, kColumns + 1, &isnull));
    }
    std::sort(rows.begin(), rows.end(), [](const ClaimedRow& a, const ClaimedRow& b) {
        if (a.priority != b.priority) return a.priority > b.priority;
        if (a.run_at != b.run_at) return a.run_at < b.run_at;
        return a.id < b.id;
    });
    return rows;
}

// A claim under max_running locks the queue's settings row until commit. A
// waiting claimer would hold it for the whole wait and stall every other
// claimer of the queue, so each of its attempts runs in a subtransaction
// that is rolled back (lock released) when it claimed nothing.
std::vector<ClaimedRow> claim_releasing_locks(const ClaimRequest& req) {
    MemoryContext context = CurrentMemoryContext;
    ResourceOwner owner = CurrentResourceOwner;
    call([] { BeginInternalSubTransaction(nullptr); });
    MemoryContextSwitchTo(context);
    std::vector<ClaimedRow> rows = claim_once(req);
    // Committing the subtransaction keeps its SPI results (the rows' datums).
    bool claimed = !rows.empty();
    call([&] {
        if (claimed)
            ReleaseCurrentSubTransaction();
        else
            RollbackAndReleaseCurrentSubTransaction();
    });
    MemoryContextSwitchTo(context);
    CurrentResourceOwner = owner;
    return rows;
}

// Milliseconds until the next scheduled job of the queue is due, or -1.
long ms_until_next_due(Datum queue) {
    Params<2> p;
    p.set(0, queue);
    p.set(1, clock_now());
    next_due.execute(p.values, p.nulls);
    bool none = column_is_null(0, 1);
    TimestampTz due = none ? 0 : DatumGetTimestampTz(column(0, 1));
    // A long wait runs this once per wake-up: free each result at once.
    call([] { SPI_freetuptable(SPI_tuptable); });
    if (none) return -1;
    long ms = static_cast<long>((due - GetCurrentTimestamp()) / 1000) + 1;
    return std::max(ms, 1L);
}

// Registered as a waiter for as long as it lives, also when an error (a
// cancelled query) unwinds the wait.
class WaitRegistration {
public:
    explicit WaitRegistration(uint32 hash) { begin_waiting(hash); }
    ~WaitRegistration() { end_waiting(); }
};

}  // namespace
}  // namespace wf::pg

using namespace wf;
using namespace wf::pg;

namespace {

// The claim arguments of wf_claim and wf_complete_and_claim, from `first`
// on: queue, worker, max_jobs, lease.
ClaimRequest read_claim_request(FunctionCallInfo fcinfo, int queue_n, int first) {
    ClaimRequest req{};
    req.queue = PG_GETARG_DATUM(queue_n);
    if (PG_ARGISNULL(first)) {
        std::string name = "pid " + std::to_string(MyProcPid);
        req.worker = call([&] { return CStringGetTextDatum(name.c_str()); });
    } else {
        core::validate_label(text_arg(fcinfo, first, "worker"), "worker");
        req.worker = PG_GETARG_DATUM(first);
    }
    req.max_jobs = int32_arg(fcinfo, first + 1, "max_jobs");
    core::validate_max_jobs(req.max_jobs);
    req.lease = PG_ARGISNULL(first + 2) ? nullptr : interval_arg(fcinfo, first + 2, "lease", false);
    return req;
}

// Puts the claimed rows in the result, after `prefix` columns if any.
void emit(FunctionCallInfo fcinfo, std::vector<ClaimedRow>& rows, int prefix_count,
          const Datum* prefix, const bool* prefix_nulls) {
    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    Datum values[kColumns + 1];
    bool nulls[kColumns + 1];
    for (ClaimedRow& row : rows) {
        for (int i = 0; i < prefix_count; i++) values[i] = prefix[i], nulls[i] = prefix_nulls[i];
        for (int i = 0; i < kColumns; i++)
            values[prefix_count + i] = row.values[i], nulls[prefix_count + i] = row.nulls[i];
        call([&] { tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls); });
    }
}

}  // namespace

// wf_claim(queue, worker, max_jobs, lease, wait) -> TABLE(...)
WF_SQL_FUNCTION(wf_claim) {
    std::string_view queue = queue_arg(fcinfo, 0);
    ClaimRequest req = read_claim_request(fcinfo, 0, 1);
    double wait_seconds = PG_ARGISNULL(4) ? 0 : interval_seconds(interval_arg(fcinfo, 4, "wait", true));
    // Longer waits than a day are a day: the client can call again.
    wait_seconds = std::min(wait_seconds, 86400.0);

    call([&] { InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC); });
    // The lock that says this session is alive, taken before any job is ours.
    call([] { ensure_session_holds_owner_lock(); });

    SpiConnection spi;
    std::optional<WaitRegistration> registration;
    TimestampTz deadline = GetCurrentTimestamp() + static_cast<int64>(wait_seconds * 1e6);
    if (wait_seconds > 0) {
        // Registered and latch reset before the first claim: a commit after
        // that claim's snapshot sets the latch, so no wake-up is lost.
        registration.emplace(queue_hash(queue.data(), queue.size()));
        call([] { ResetLatch(MyLatch); });
    }
    bool limited = registration && queue_settings(req.queue).has_max_running;
    auto attempt = [&] { return limited ? claim_releasing_locks(req) : claim_once(req); };
    std::vector<ClaimedRow> rows = attempt();
    while (rows.empty() && registration) {
        long remaining_ms = static_cast<long>((deadline - GetCurrentTimestamp()) / 1000);
        if (remaining_ms <= 0) break;
        long timeout = remaining_ms;
        long due = ms_until_next_due(req.queue);
        if (due >= 0) timeout = std::min(timeout, due);
        if (!shared_memory_ready()) timeout = std::min(timeout, kPollWithoutSharedMemoryMs);
        call([&] {
            WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, timeout,
                      PG_WAIT_EXTENSION);
            ResetLatch(MyLatch);
            CHECK_FOR_INTERRUPTS();
            // A wf_configure_queue that woke us (unpaused) sent an invalidation.
            AcceptInvalidationMessages();
        });
        rows = attempt();
    }
    emit(fcinfo, rows, 0, nullptr, nullptr);
    spi.finish();
    return 0;
}

// wf_complete_and_claim(queue, id, attempt, result, worker, max_jobs, lease)
// -> TABLE(completed, <wf_claim's columns>): a worker's next round trip in
// one call and one commit. `completed` says whether the completion counted
// (false: a stale token, nothing stored); when no job was claimed a single
// row carries it, with NULL job columns. No `wait`: it would hold the
// completion uncommitted.
WF_SQL_FUNCTION(wf_complete_and_claim) {
    fencing_token_args(fcinfo);
    if (!PG_ARGISNULL(3)) payload_arg(fcinfo, 3, "result");
    ClaimRequest req = read_claim_request(fcinfo, 0, 4);

    call([&] { InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC); });
    call([] { ensure_session_holds_owner_lock(); });

    SpiConnection spi;
    Datum completed = BoolGetDatum(complete_job(PG_GETARG_DATUM(0), PG_GETARG_DATUM(1),
                                                PG_GETARG_DATUM(2),
                                                PG_ARGISNULL(3) ? 0 : PG_GETARG_DATUM(3),
                                                PG_ARGISNULL(3)));
    bool completed_null = false;
    std::vector<ClaimedRow> rows = claim_once(req);
    if (rows.empty()) {
        ClaimedRow none{};
        std::fill(std::begin(none.nulls), std::end(none.nulls), true);
        rows.push_back(none);
    }
    emit(fcinfo, rows, 1, &completed, &completed_null);
    spi.finish();
    return 0;
}

// wf_heartbeat(queue, id, attempt, extend) -> boolean: still yours?
WF_SQL_FUNCTION(wf_heartbeat) {
    fencing_token_args(fcinfo);
    Interval* extend = PG_ARGISNULL(3) ? nullptr : interval_arg(fcinfo, 3, "extend", false);

    SpiConnection spi;
    Params<5> p;
    p.set(0, PG_GETARG_DATUM(0));
    p.set(1, PG_GETARG_DATUM(1));
    p.set(2, PG_GETARG_DATUM(2));
    bool yours = false;
    if (read_claim.execute(p.values, p.nulls) == 1 && !column_bool(0, 2)) {
        bool has_lease = !column_is_null(0, 1);
        if (!has_lease && extend == nullptr) {
            yours = true;  // ownership is the session: nothing to write
        } else {
            p.set(3, extend ? PointerGetDatum(extend) : column(0, 1));
            p.set(4, clock_now());
            yours = extend_lease.execute(p.values, p.nulls) == 1;
        }
    }
    spi.finish();
    PG_RETURN_BOOL(yours);
}
