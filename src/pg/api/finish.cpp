// How a job leaves `running` (wf_complete, wf_fail) and how people intervene
// (wf_retry, wf_cancel). Every worker write is fenced by (queue, id, attempt).
#include "core/retry_policy.hpp"
#include "core/error.hpp"
#include "core/validation.hpp"
#include "pg/base/args.hpp"
#include "pg/jobs/job_state.hpp"
#include "pg/runtime/wakeup.hpp"
#include "pg/runtime/worker_registry.hpp"

extern "C" {
#include "common/pg_prng.h"
}

namespace wf::pg {
namespace {

// A job whose cancellation was requested while it ran ends `cancelled`
// whichever way it finishes.
// The job row first, then its claim: the reaper takes them in the same
// order, so the two never deadlock. A running job's row says pending at the
// attempt before the claim's (see pg_wf--1.1--1.2.sql); every end of an
// attempt writes the claim's attempt, worker and start into it.
PreparedStatement complete_one(
    "WITH finished AS ("
    " UPDATE wf.job j SET status = CASE WHEN j.cancel_requested THEN 'cancelled' ELSE 'done' END,"
    "       result = CASE WHEN j.cancel_requested THEN j.result ELSE $4 END,"
    "       finished_at = now(),"
    "       last_error = CASE WHEN j.cancel_requested THEN 'cancelled while running'"
    "                         ELSE j.last_error END," WF_END_ATTEMPT
    " RETURNING j.id, j.attempt, j.status, j.has_dependents),"
    " released AS (DELETE FROM wf.claim c"
    "               WHERE c.queue = $1 AND c.id = $2 AND c.attempt = $3"
    "                 AND EXISTS (SELECT 1 FROM finished))"
    " SELECT status, has_dependents FROM finished",
    {TEXTOID, INT8OID, INT4OID, JSONBOID});

// The same for many jobs of one queue, in one statement.
// Each (id, attempt) finds its claim through the claim table's key: the
// lateral subquery is kept apart (OFFSET 0) so that the planner cannot turn
// it into a scan of every claim of the queue joined to the input.
PreparedStatement complete_many(
    "WITH input AS ("
    "  SELECT t.id, t.attempt, t.result, c.started_at, c.worker"
    "    FROM unnest($2::bigint[], $3::int[], $4::jsonb[]) AS t(id, attempt, result),"
    "         LATERAL (SELECT c.started_at, c.worker FROM wf.claim c"
    "                   WHERE c.queue = $1 AND c.id = t.id AND c.attempt = t.attempt"
    "                  OFFSET 0) AS c),"
    " finished AS ("
    " UPDATE wf.job j"
    "   SET status = CASE WHEN j.cancel_requested THEN 'cancelled' ELSE 'done' END,"
    "       attempt = i.attempt, started_at = i.started_at, worker = i.worker,"
    "       result = CASE WHEN j.cancel_requested THEN j.result ELSE i.result END,"
    "       finished_at = now(),"
    "       last_error = CASE WHEN j.cancel_requested THEN 'cancelled while running'"
    "                         ELSE j.last_error END"
    "  FROM input i"
    " WHERE j.queue = $1 AND j.id = i.id AND j.attempt + 1 = i.attempt AND j.status = 'pending'"
    " RETURNING j.id, j.status, j.has_dependents),"
    " released AS (DELETE FROM wf.claim c"
    "               WHERE c.queue = $1 AND c.id = ANY (ARRAY(SELECT id FROM finished)))"
    " SELECT id, status, has_dependents FROM finished",
    {TEXTOID, INT8ARRAYOID, INT4ARRAYOID, JSONBARRAYOID});

// Children are locked in one order (queue, id) before they are updated:
// two completions of parents that share children then queue up on the
// first shared child instead of deadlocking.
#define WF_LOCK_CHILDREN_SQL(WAIT) \
    "SELECT c.id FROM wf.job c" \
    " WHERE c.id = ANY (ARRAY(SELECT d.child_id FROM wf.dependency d" \
    "                         WHERE d.parent_id = ANY ($1)))" \
    "   AND c.status = 'blocked'" \
    " ORDER BY c.queue, c.id FOR NO KEY UPDATE" WAIT

PreparedStatement lock_children(WF_LOCK_CHILDREN_SQL(""), {INT8ARRAYOID});

// With the background worker running, a child another transaction holds
// is skipped, and its release left to the worker (below).
PreparedStatement lock_children_skipping(WF_LOCK_CHILDREN_SQL(" SKIP LOCKED"), {INT8ARRAYOID});

// The edges to blocked children not locked by this transaction ($2: those
// it locked) become debts for the worker.
PreparedStatement defer_releases(
    "INSERT INTO wf.release_debt (child_queue, child_id, parent_id)"
    " SELECT d.child_queue, d.child_id, d.parent_id FROM wf.dependency d"
    "   JOIN wf.job c ON c.queue = d.child_queue AND c.id = d.child_id"
    "  WHERE d.parent_id = ANY ($1) AND c.status = 'blocked' AND c.id <> ALL ($2)"
    " ON CONFLICT DO NOTHING",
    {INT8ARRAYOID, INT8ARRAYOID});

// Each child in d(child_queue, child_id, n) loses n unfinished
// dependencies; the last one makes it ready. Concurrent parents serialise
// on the child row, and the UPDATE re-reads it. D_CTE defines d.
#define WF_RELEASE_SQL(D_CTE, FILTER) \
    "WITH " D_CTE ", released AS (" \
    " UPDATE wf.job c" \
    "   SET pending_deps = c.pending_deps - d.n," \
    "       status = CASE WHEN c.pending_deps = d.n THEN 'pending' ELSE c.status END," \
    "       run_at = CASE WHEN c.pending_deps = d.n THEN greatest(c.run_at, now())" \
    "                     ELSE c.run_at END" \
    "  FROM d WHERE c.queue = d.child_queue AND c.id = d.child_id AND c.status = 'blocked'" \
    FILTER \
    " RETURNING c.queue, c.priority, c.run_at, c.id, c.status)," \
    " ready AS (INSERT INTO wf.ready (queue, priority, run_at, id)" \
    "           SELECT queue, priority, run_at, id FROM released WHERE status = 'pending'" \
    "           ON CONFLICT DO NOTHING)" \
    " SELECT queue, status FROM released"

// One release per finished parent in $1; $2, when not NULL, limits it to
// those children (the ones this transaction locked).
PreparedStatement release_children(
    WF_RELEASE_SQL("d AS (SELECT child_queue, child_id, count(*) AS n FROM wf.dependency"
                   "       WHERE parent_id = ANY ($1) GROUP BY 1, 2)",
                   " AND ($2::bigint[] IS NULL OR c.id = ANY ($2))"),
    {INT8ARRAYOID, INT8ARRAYOID});

// The worker's side: children with debts that nobody else holds, locked in
// order, their debts applied as one release each. A child held by another
// transaction keeps its debts for the next round: the worker never waits.
PreparedStatement lock_indebted_children(
    "SELECT c.id FROM wf.job c"
    " WHERE c.id = ANY (ARRAY(SELECT DISTINCT r.child_id FROM wf.release_debt r LIMIT 10000))"
    " ORDER BY c.queue, c.id FOR NO KEY UPDATE SKIP LOCKED",
    {});

PreparedStatement settle_debts(
    WF_RELEASE_SQL("paid AS (DELETE FROM wf.release_debt r WHERE r.child_id = ANY ($1)"
                   "          RETURNING r.child_queue, r.child_id),"
                   " d AS (SELECT child_queue, child_id, count(*) AS n FROM paid GROUP BY 1, 2)",
                   ""),
    {INT8ARRAYOID});

PreparedStatement cancel_descendants(
    "WITH RECURSIVE below(queue, id) AS ("
    "    SELECT d.child_queue, d.child_id FROM wf.dependency d WHERE d.parent_id = ANY($1)"
    "  UNION"
    "    SELECT d.child_queue, d.child_id FROM below JOIN wf.dependency d ON d.parent_id = below.id)"
    " UPDATE wf.job j SET status = 'cancelled', finished_at = now(), cancelled_by = $3,"
    // The reason names the root: a workflow step by its name.
    "        last_error = (SELECT CASE WHEN r.step_name IS NOT NULL"
    "                                  THEN format('step \"%s\" (job %s) %s', r.step_name, r.id, $2)"
    "                                  ELSE format('dependency job %s %s', r.id, $2) END"
    "                        FROM wf.job r WHERE r.id = $3)"
    "   FROM below WHERE j.queue = below.queue AND j.id = below.id AND j.status = 'blocked'",
    {INT8ARRAYOID, TEXTOID, INT8OID});

PreparedStatement read_for_fail(
    "SELECT c.attempt, j.max_attempts, j.cancel_requested,"
    "       extract(epoch FROM coalesce(q.backoff_base, '1 second')),"
    "       extract(epoch FROM coalesce(q.backoff_max, '1 hour'))"
    "  FROM wf.job j, wf.claim c LEFT JOIN wf.queue_config q ON q.queue = $1"
    " WHERE " WF_TOKEN_HOLDS
    "   FOR NO KEY UPDATE OF j",
    {TEXTOID, INT8OID, INT4OID});

PreparedStatement record_failure(
    "WITH failed AS ("
    " UPDATE wf.job j SET status = $4, last_error = $5,"
    "       run_at = CASE WHEN $4 = 'pending' THEN now() + make_interval(secs => $6) ELSE j.run_at END,"
    "       finished_at = CASE WHEN $4 = 'pending' THEN NULL ELSE now() END," WF_END_ATTEMPT
    " RETURNING j.queue, j.priority, j.run_at, j.id, j.attempt, j.status),"
    " released AS (DELETE FROM wf.claim c"
    "               WHERE c.queue = $1 AND c.id = $2 AND c.attempt = $3"
    "                 AND EXISTS (SELECT 1 FROM failed)),"
    " ready AS (INSERT INTO wf.ready (queue, priority, run_at, id)"
    "           SELECT queue, priority, run_at, id FROM failed WHERE status = 'pending' ON CONFLICT DO NOTHING)"
    " SELECT 1",
    {TEXTOID, INT8OID, INT4OID, TEXTOID, TEXTOID, FLOAT8OID});

// Before a retry counts its unfinished dependencies: locked, so that one
// completing meanwhile either is seen done or waits and then releases it.
PreparedStatement lock_retry_dependencies(
    "SELECT p.id FROM wf.job p"
    " WHERE p.id = ANY ((SELECT depends_on FROM wf.job WHERE queue = $1 AND id = $2)::bigint[])"
    " ORDER BY p.id FOR NO KEY UPDATE",
    {TEXTOID, INT8OID});

// A recount of a job's unfinished dependencies sees every committed
// completion, so the same statement (one snapshot) cancels the debts
// (wf.release_debt, schema 1.1) those completions left toward the job.
#define WF_FORGIVE_DEBTS(CTE) \
    ", forgiven AS (DELETE FROM wf.release_debt r WHERE r.child_id IN (SELECT id FROM " CTE "))"

#define WF_RETRY_SQL(FORGIVE) \
    "WITH retried AS (" \
    " UPDATE wf.job j" \
    "   SET status = CASE WHEN u.unfinished > 0 THEN 'blocked' ELSE 'pending' END," \
    "       pending_deps = u.unfinished, max_attempts = j.attempt + j.attempt_budget," \
    "       run_at = now(), finished_at = NULL, cancelled_by = NULL, cancel_requested = false" \
    "  FROM (SELECT count(*) FILTER (WHERE p.status <> 'done') AS unfinished" \
    "          FROM wf.job p, wf.job me" \
    "         WHERE me.queue = $1 AND me.id = $2 AND p.id = ANY(me.depends_on)) AS u" \
    " WHERE j.queue = $1 AND j.id = $2 AND j.status IN ('failed', 'cancelled')" \
    " RETURNING j.queue, j.priority, j.run_at, j.id, j.status)" \
    FORGIVE \
    ", ready AS (INSERT INTO wf.ready (queue, priority, run_at, id)" \
    "           SELECT queue, priority, run_at, id FROM retried WHERE status = 'pending' ON CONFLICT DO NOTHING)" \
    " SELECT status FROM retried"

// Back from the dead letter with a fresh budget of attempts. The attempt
// counter itself never goes back: it is the fencing token.
PreparedStatement retry_job(WF_RETRY_SQL(WF_FORGIVE_DEBTS("retried")), {TEXTOID, INT8OID});

// The jobs a failed job ($1) cancelled, transitively.
#define WF_CANCELLED_BY_SQL \
    "WITH RECURSIVE back(queue, id) AS (" \
    "    SELECT j.queue, j.id FROM wf.dependency d" \
    "      JOIN wf.job j ON j.queue = d.child_queue AND j.id = d.child_id" \
    "     WHERE d.parent_id = $1 AND j.cancelled_by = $1 AND j.status = 'cancelled'" \
    "  UNION" \
    "    SELECT j.queue, j.id FROM back JOIN wf.dependency d ON d.parent_id = back.id" \
    "      JOIN wf.job j ON j.queue = d.child_queue AND j.id = d.child_id" \
    "     WHERE j.cancelled_by = $1 AND j.status = 'cancelled')"

// Before they are recounted, their parents are locked (in id order), as
// wf_retry locks its own job's: a parent completing meanwhile is then
// either seen done or waits and finds the job blocked again, to release it.
PreparedStatement lock_restored_parents(
    WF_CANCELLED_BY_SQL
    " SELECT p.id FROM back JOIN wf.job j ON j.queue = back.queue AND j.id = back.id"
    "   JOIN wf.job p ON p.id = ANY (j.depends_on)"
    " ORDER BY p.id FOR NO KEY UPDATE OF p",
    {INT8OID});

// The jobs a failed job cancelled come back with it, blocked on it again.
#define WF_RESTORE_SQL(FORGIVE) \
    WF_CANCELLED_BY_SQL "," \
    " restored AS (" \
    " UPDATE wf.job j" \
    "    SET status = 'blocked', finished_at = NULL, cancelled_by = NULL, last_error = NULL," \
    "        pending_deps = (SELECT count(*) FROM wf.job p" \
    "                         WHERE p.id = ANY(j.depends_on) AND p.status <> 'done')" \
    "   FROM back WHERE j.queue = back.queue AND j.id = back.id" \
    " RETURNING j.id)" \
    FORGIVE \
    " SELECT id FROM restored"

PreparedStatement restore_descendants(WF_RESTORE_SQL(WF_FORGIVE_DEBTS("restored")), {INT8OID});

// wf_cancel locks the job row first, as completions, the reaper and
// wf_cancel_workflow do (a claim locks no job row). Locked, the job changes
// status only by a claim taking its ready row; so a pending job's ready row
// is taken next, waiting for a claimer that holds one. After that the job
// is running (that claimer committed: it is flagged) or its ready row is
// gone (taken here, or its claim was lost in a crash: it is cancelled).
PreparedStatement lock_job(
    "SELECT status = 'pending', priority, run_at FROM wf.job"
    " WHERE queue = $1 AND id = $2 FOR NO KEY UPDATE",
    {TEXTOID, INT8OID});

// The key of a pending job's ready row is its own priority and run_at.
PreparedStatement leave_ready_set(
    "DELETE FROM wf.ready WHERE queue = $1 AND priority = $3 AND run_at = $4 AND id = $2",
    {TEXTOID, INT8OID, INT4OID, TIMESTAMPTZOID});

// A running job is only flagged (it stays pending in its row).
#define WF_RUNNING_J WF_JOB_RUNNING("j")
PreparedStatement cancel_job(
    "UPDATE wf.job j"
    "   SET status = CASE WHEN " WF_RUNNING_J " THEN j.status ELSE 'cancelled' END,"
    "       cancel_requested = " WF_RUNNING_J ","
    "       finished_at = CASE WHEN " WF_RUNNING_J " THEN NULL ELSE now() END,"
    "       last_error = CASE WHEN " WF_RUNNING_J " THEN j.last_error ELSE 'cancelled' END"
    " WHERE j.queue = $1 AND j.id = $2"
    "   AND j.status IN ('blocked', 'pending', 'waiting') AND NOT j.cancel_requested"
    " RETURNING j.status",
    {TEXTOID, INT8OID});

}  // namespace

Datum clock_now() { return TimestampTzGetDatum(GetCurrentTimestamp()); }

uint64 cancel_dependents(const std::vector<int64>& job_ids, const char* what_happened) {
    uint64 cancelled = 0;
    // One pass per root keeps cancelled_by and the reason naming the job
    // that failed.
    for (int64 id : job_ids) {
        Params<3> p;
        p.set(0, int8_array({id}));
        p.set(1, text_datum(what_happened));
        p.set(2, Int64GetDatum(id));
        cancelled += cancel_descendants.execute(p.values, p.nulls);
    }
    return cancelled;
}

namespace {
// Wakes the claimers of the children a release made pending (its result).
void note_released(uint64 rows) {
    for (uint64 r = 0; r < rows; r++) {
        if (column_text(r, 2) != "pending") continue;
        std::string queue = column_text(r, 1);
        note_queue_ready(queue.data(), queue.size());
    }
}
}  // namespace

void release_dependents(const std::vector<int64>& job_ids) {
    if (job_ids.empty()) return;
    Params<2> p;
    p.set(0, int8_array(job_ids));
    // A child shared with another parent completing at the same moment is
    // locked by that completion until its commit is durable. Waiting for it
    // would cost this completion an fsync; with the worker running, the
    // release is left to it instead.
    bool may_defer = database_worker_alive(MyDatabaseId);
    if (!may_defer) {
        lock_children.execute(p.values, p.nulls);
        p.set_null(1);
        note_released(release_children.execute(p.values, p.nulls));
        return;
    }
    uint64 locked = lock_children_skipping.execute(p.values, p.nulls);
    std::vector<int64> held;
    for (uint64 r = 0; r < locked; r++) held.push_back(column_int64(r, 1));
    p.set(1, int8_array(held));
    if (!held.empty()) note_released(release_children.execute(p.values, p.nulls));
    if (defer_releases.execute(p.values, p.nulls) > 0) note_releases_deferred();
}

int64 settle_release_debts() {
    uint64 locked = lock_indebted_children.execute(nullptr, nullptr);
    if (locked == 0) return 0;
    std::vector<int64> children;
    for (uint64 r = 0; r < locked; r++) children.push_back(column_int64(r, 1));
    Params<1> p;
    p.set(0, int8_array(children));
    uint64 rows = settle_debts.execute(p.values, p.nulls);
    note_released(rows);
    return static_cast<int64>(rows);
}


}  // namespace wf::pg

using namespace wf;
using namespace wf::pg;

bool wf::pg::complete_job(Datum queue, Datum id, Datum attempt, Datum result,
                          bool result_is_null) {
    Params<4> p;
    p.set(0, queue);
    p.set(1, id);
    p.set(2, attempt);
    if (result_is_null) p.set_null(3); else p.set(3, result);
    if (complete_one.execute(p.values, p.nulls) != 1) return false;
    bool done = column_text(0, 1) == "done";
    bool has_dependents = column_bool(0, 2);  // most jobs have none: skip the work
    if (has_dependents && done)
        release_dependents({DatumGetInt64(id)});
    else if (has_dependents)
        cancel_dependents({DatumGetInt64(id)}, "was cancelled");
    // A slot under max_running is free again.
    text* q = call([&] { return DatumGetTextPP(queue); });
    note_queue_ready(VARDATA_ANY(q), VARSIZE_ANY_EXHDR(q));
    return done;
}

// wf_complete(queue, id, attempt, result) -> boolean
WF_SQL_FUNCTION(wf_complete) {
    fencing_token_args(fcinfo);
    if (!PG_ARGISNULL(3)) payload_arg(fcinfo, 3, "result");
    SpiConnection spi;
    bool done = complete_job(PG_GETARG_DATUM(0), PG_GETARG_DATUM(1), PG_GETARG_DATUM(2),
                             PG_ARGISNULL(3) ? 0 : PG_GETARG_DATUM(3), PG_ARGISNULL(3));
    spi.finish();
    PG_RETURN_BOOL(done);
}

// wf_complete_many(queue, ids, attempts, results) -> SETOF bigint: the ids
// completed; a stale (id, attempt) is left out and changes nothing.
WF_SQL_FUNCTION(wf_complete_many) {
    std::string_view queue = queue_arg(fcinfo, 0);
    core::require_not_null(PG_ARGISNULL(1), "ids");
    core::require_not_null(PG_ARGISNULL(2), "attempts");
    Datum ids = PG_GETARG_DATUM(1), attempts = PG_GETARG_DATUM(2);
    int n_ids = 0, n_attempts = 0, n_results = 0;
    bool has_null = false;
    call([&] {
        ArrayType* a = DatumGetArrayTypeP(ids);
        ArrayType* b = DatumGetArrayTypeP(attempts);
        n_ids = ArrayGetNItems(ARR_NDIM(a), ARR_DIMS(a));
        n_attempts = ArrayGetNItems(ARR_NDIM(b), ARR_DIMS(b));
        has_null = array_contains_nulls(a) || array_contains_nulls(b);
    });
    if (has_null)
        throw core::Error(core::sqlstate::null_not_allowed,
                          "ids and attempts must not contain null");
    if (n_ids != n_attempts)
        throw core::Error(core::sqlstate::invalid_parameter,
                          "ids and attempts must have the same length",
                          std::to_string(n_ids) + " ids, " + std::to_string(n_attempts) +
                              " attempts.");
    core::validate_batch_length(static_cast<size_t>(n_ids));
    if (!PG_ARGISNULL(3)) {
        Datum results = PG_GETARG_DATUM(3);
        size_t largest = 0;
        call([&] {
            ArrayType* r = DatumGetArrayTypeP(results);
            n_results = ArrayGetNItems(ARR_NDIM(r), ARR_DIMS(r));
            Datum* items;
            bool* nulls;
            int count;
            deconstruct_array(r, JSONBOID, -1, false, TYPALIGN_INT, &items, &nulls, &count);
            for (int i = 0; i < count; i++)
                if (!nulls[i]) largest = std::max<size_t>(largest, toast_raw_datum_size(items[i]));
        });
        if (n_results != n_ids)
            throw core::Error(core::sqlstate::invalid_parameter,
                              "results must have one element per id",
                              std::to_string(n_ids) + " ids, " + std::to_string(n_results) +
                                  " results.");
        core::validate_payload_size(largest > VARHDRSZ ? largest - VARHDRSZ : 0,
                                    static_cast<size_t>(max_payload_size), "result");
    }

    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    call([&] { InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC); });
    SpiConnection spi;
    Params<4> p;
    p.set(0, PG_GETARG_DATUM(0));
    p.set(1, ids);
    p.set(2, attempts);
    if (PG_ARGISNULL(3)) p.set_null(3); else p.set(3, PG_GETARG_DATUM(3));
    uint64 rows = complete_many.execute(p.values, p.nulls);
    std::vector<int64> done, cancelled, parents_done;
    for (uint64 r = 0; r < rows; r++) {
        int64 id = column_int64(r, 1);
        bool is_done = column_text(r, 2) == "done";
        bool has_dependents = column_bool(r, 3);
        if (is_done) done.push_back(id);
        if (is_done && has_dependents) parents_done.push_back(id);
        if (!is_done && has_dependents) cancelled.push_back(id);
    }
    std::sort(done.begin(), done.end());
    for (int64 id : done) {
        Datum value = Int64GetDatum(id);
        bool isnull = false;
        call([&] { tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, &value, &isnull); });
    }
    release_dependents(parents_done);
    if (!cancelled.empty()) cancel_dependents(cancelled, "was cancelled");
    if (rows > 0) note_queue_ready(queue.data(), queue.size());
    spi.finish();
    return 0;
}

// wf_fail(queue, id, attempt, error, retry_in, permanent) -> text: the new
// status, or NULL for a stale token.
WF_SQL_FUNCTION(wf_fail) {
    fencing_token_args(fcinfo);
    std::string_view queue = text_arg(fcinfo, 0, "queue");
    std::string_view error = text_arg(fcinfo, 3, "error");
    Interval* retry_in = PG_ARGISNULL(4) ? nullptr : interval_arg(fcinfo, 4, "retry_in", true);
    bool permanent = bool_arg(fcinfo, 5, "permanent");
    core::validate_payload_size(error.size(), static_cast<size_t>(max_payload_size), "error");

    SpiConnection spi;
    Params<6> p;
    p.set(0, PG_GETARG_DATUM(0));
    p.set(1, PG_GETARG_DATUM(1));
    p.set(2, PG_GETARG_DATUM(2));
    if (read_for_fail.execute(p.values, p.nulls) != 1) {
        spi.finish();
        PG_RETURN_NULL();
    }
    int attempt = column_int32(0, 1);
    int max_attempts = column_int32(0, 2);
    bool cancel_requested = column_bool(0, 3);
    core::BackoffSettings backoff;
    backoff.base_seconds = call([&] { return DatumGetFloat8(DirectFunctionCall1(numeric_float8, column(0, 4))); });
    backoff.max_seconds = call([&] { return DatumGetFloat8(DirectFunctionCall1(numeric_float8, column(0, 5))); });

    const char* status = "pending";
    double delay = 0;
    if (cancel_requested)
        status = "cancelled";
    else if (core::classify_failure(attempt, max_attempts, permanent) == core::FailOutcome::dead_letter)
        status = "failed";
    else if (retry_in)
        delay = interval_seconds(retry_in);
    else
        delay = core::backoff_seconds(backoff, attempt, pg_prng_double(&pg_global_prng_state));

    p.set(3, text_datum(status));
    p.set(4, PG_GETARG_DATUM(3));
    p.set(5, Float8GetDatum(delay));
    record_failure.execute(p.values, p.nulls);
    if (std::strcmp(status, "pending") != 0)
        cancel_dependents({PG_GETARG_INT64(1)},
                             std::strcmp(status, "failed") == 0 ? "failed" : "was cancelled");
    // Ready again (after the delay), or a max_running slot freed.
    note_queue_ready(queue.data(), queue.size());
    spi.finish();
    Datum result = call([&] { return PointerGetDatum(cstring_to_text(status)); });
    PG_RETURN_DATUM(result);
}

// wf_retry(queue, id) -> boolean: a failed or cancelled job runs again, and
// the jobs its failure cancelled wait on it again.
WF_SQL_FUNCTION(wf_retry) {
    std::string_view queue = queue_arg(fcinfo, 0);
    int64 id = int64_arg(fcinfo, 1, "id");

    SpiConnection spi;
    Params<2> p;
    p.set(0, PG_GETARG_DATUM(0));
    p.set(1, PG_GETARG_DATUM(1));
    lock_retry_dependencies.execute(p.values, p.nulls);
    bool retried = retry_job.execute(p.values, p.nulls) == 1;
    if (retried) {
        if (column_text(0, 1) == "pending") note_queue_ready(queue.data(), queue.size());
        Params<1> r;
        r.set(0, Int64GetDatum(id));
        lock_restored_parents.execute(r.values, r.nulls);
        restore_descendants.execute(r.values, r.nulls);
    }
    spi.finish();
    PG_RETURN_BOOL(retried);
}

// wf_cancel(queue, id) -> boolean
WF_SQL_FUNCTION(wf_cancel) {
    queue_arg(fcinfo, 0);
    int64 id = int64_arg(fcinfo, 1, "id");

    SpiConnection spi;
    bool cancelled = false;
    Params<4> p;
    p.set(0, PG_GETARG_DATUM(0));
    p.set(1, PG_GETARG_DATUM(1));
    if (lock_job.execute(p.values, p.nulls) == 1) {
        if (column_bool(0, 1)) {
            p.set(2, column(0, 2));
            p.set(3, column(0, 3));
            leave_ready_set.execute(p.values, p.nulls);
        }
        cancelled = cancel_job.execute(p.values, p.nulls) == 1;
    }
    // A running job is only flagged: its dependents go when it stops.
    if (cancelled && column_text(0, 1) == "cancelled") cancel_dependents({id}, "was cancelled");
    spi.finish();
    PG_RETURN_BOOL(cancelled);
}
