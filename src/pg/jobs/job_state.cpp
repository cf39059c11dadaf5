// The job state machine's transitions (see job_state.hpp for the diagram
// and the invariants). Each is a statement or two over wf.job, wf.ready,
// wf.claim and wf.event_wait; the dependency engine (dependencies.cpp)
// carries their effects to other jobs.
#include "pg/jobs/job_state.hpp"

#include <unordered_map>

#include "pg/base/advisory_locks.hpp"
#include "pg/citus/shard_route.hpp"

#include "core/error.hpp"
#include "core/retry_policy.hpp"
#include "pg/jobs/children.hpp"
#include "pg/jobs/claim_rows.hpp"
#include "pg/jobs/dependencies.hpp"
#include "pg/jobs/job_inserts.hpp"
#include "pg/jobs/job_rows.hpp"
#include "pg/jobs/ready_set.hpp"
#include "pg/jobs/remote_dependencies.hpp"
#include "pg/runtime/metrics.hpp"
#include "pg/runtime/ownership.hpp"
#include "pg/runtime/run_as.hpp"
#include "pg/runtime/wakeup.hpp"

extern "C" {
#include "common/pg_prng.h"
#include "storage/lmgr.h"
}

namespace wf::pg {
namespace {

// Parameters $1..$3 of a statement fenced by the token.
template <int N>
Params<N> token_params(const FencingToken& token) {
    Params<N> p;
    p.set(0, token.queue);
    p.set(1, Int64GetDatum(token.id));
    p.set(2, Int32GetDatum(token.attempt));
    return p;
}

std::string_view text_view(Datum d) {
    text* t = call([&] { return DatumGetTextPP(d); });
    return std::string_view(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
}

// Wakes the claimers of every queue named in column `queue` of `rows`
// whose column `status` (if given) is 'pending'.
void note_ready_queues(const Rows& rows, const char* status_column = nullptr) {
    for (uint64 r = 0; r < rows.size(); r++) {
        if (status_column && rows.text_at(r, status_column) != "pending") continue;
        note_queue_ready(rows.text_at(r, "queue"));
    }
}

// ---------------------------------------------------------------- enqueue

// A job with an idempotency key is inserted by SQL: ON CONFLICT waits for
// a racing insert of the same key to commit, then does nothing. A pending
// job also gets its row in the ready set, in the same statement. Every
// other new job is inserted by hand (job_inserts.hpp).
PreparedStatement insert_job_with_idempotency_key(
    "WITH job AS ("
    " INSERT INTO wf.job (id, queue, status, payload, run_at, priority, max_attempts,"
    "                    attempt_budget, idempotency_key, workflow_id, step_name,"
    "                    depends_on, pending_deps, last_error, cancelled_by, finished_at,"
    "                    key, dedup_key, max_run_time, start_by, version, child_of)"
    " VALUES (nextval('wf.job_id_seq'), $1, $2, $3, coalesce($4, now()), $5, $6, $6, $7, $8, $9, $10, $11, $12, $13,"
    "         CASE WHEN $2 = 'cancelled' THEN now() END, $14, $15, $16, $17, $18, $19)"
    " ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING"
    " RETURNING queue, priority, run_at, id, key, version, status),"
    WF_SQL_ENTER_READY("job", WF_SQL_IF_PENDING)
    " SELECT id FROM job",
    {TEXTOID, TEXTOID, JSONBOID, TIMESTAMPTZOID, INT4OID, INT4OID, TEXTOID, UUIDOID, TEXTOID,
     INT8ARRAYOID, INT4OID, TEXTOID, INT8OID, TEXTOID, TEXTOID, INTERVALOID, TIMESTAMPTZOID,
     TEXTOID, INT8OID});

// A job enqueued into a child workflow belongs to its parent too. A
// statement of its own, run only then: a subquery in the insert would be
// set up by every enqueue's executor (a lock on wf.workflow each time).
PreparedStatement workflow_parent(
    "SELECT child_of FROM wf.workflow WHERE id = $1", {UUIDOID});

PreparedStatement find_by_key(
    "SELECT id, payload = $3 AS same_payload FROM wf.job"
    " WHERE queue = $1 AND idempotency_key = $2",
    {TEXTOID, TEXTOID, JSONBOID});

// ------------------------------------------------------------------ claim

// After the ready rows are taken (ready_set.cpp) and the attempts begun
// (claim_rows.cpp), what a claimed job hands out besides its row, read by
// one statement for the jobs that have any: the results of the jobs it
// depended on, keyed by step name (or id), and the checkpoints of earlier
// attempts. Each job is looked up by its key (OFFSET 0 keeps the lookup
// apart): whatever the statistics say, a batch of n costs n index probes.
#define WF_CLAIM_READS_SQL(INPUTS) \
    "SELECT x.id," \
    "       CASE WHEN x.inputs THEN" INPUTS " END AS inputs," \
    "       CASE WHEN x.checkpoints THEN" \
    "         (SELECT jsonb_object_agg(k.step, coalesce(k.output, 'null'))" \
    "            FROM wf.checkpoint k WHERE k.queue = $1 AND k.job_id = j.id) END AS checkpoints" \
    "  FROM unnest($2::bigint[], $3::boolean[], $4::boolean[]) AS x(id, inputs, checkpoints)," \
    "       LATERAL (SELECT * FROM wf.job j WHERE j.queue = $1 AND j.id = x.id OFFSET 0) AS j"
#define WF_CLAIM_READS_TYPES {TEXTOID, INT8ARRAYOID, BOOLARRAYOID, BOOLARRAYOID}
#define WF_SQL_LOCAL_INPUTS \
    " (SELECT jsonb_object_agg(coalesce(p.step_name, p.id::text), coalesce(p.result, 'null'))" \
    "    FROM wf.job p WHERE p.id = ANY (j.depends_on))"
PreparedStatement claim_reads(WF_CLAIM_READS_SQL(WF_SQL_LOCAL_INPUTS), WF_CLAIM_READS_TYPES);
// On a distributed pg_wf, the results of dependencies in other shard
// groups too, delivered to this one (remote_dependencies.hpp).
PreparedStatement claim_reads_in_group(
    WF_CLAIM_READS_SQL(
        " (SELECT jsonb_object_agg(i.name, i.result) FROM ("
        "    SELECT coalesce(p.step_name, p.id::text) AS name, coalesce(p.result, 'null') AS result"
        "      FROM wf.job p WHERE p.id = ANY (j.depends_on)"
        "    UNION ALL"
        "    SELECT r.name, coalesce(r.result, 'null') FROM wf.remote_input r"
        "     WHERE r.child_queue = j.queue AND r.child_id = j.id) AS i)"),
    WF_CLAIM_READS_TYPES);

PreparedStatement count_running_statement(
    "SELECT count(*) AS running FROM wf.claim c JOIN wf.job j ON j.queue = $1 AND j.id = c.id"
    " WHERE c.queue = $1 AND " WF_SQL_ROW_RUNS("j", "c.attempt"),
    {TEXTOID});

// When the next scheduled job of the queue becomes due, to bound a wait.
PreparedStatement next_due(
    "SELECT min(run_at) AS due FROM wf.ready WHERE queue = $1 AND run_at > $2",
    {TEXTOID, TIMESTAMPTZOID});

// A claim past its max run time is over, whatever its lease says: the
// reaper takes it back at its next pass.
PreparedStatement read_claim(
    "SELECT c.lease, j.cancel_requested,"
    "       coalesce(c.run_deadline <= clock_timestamp(), false) AS overdue"
    "  FROM wf.job j, wf.claim c WHERE " WF_SQL_TOKEN_HOLDS,
    {TEXTOID, INT8OID, INT4OID});

// Leases live in the unlogged claim table: a renewal writes no WAL. No
// lease runs past the end of the attempt's max run time.
PreparedStatement extend_lease(
    "UPDATE wf.claim SET lease = $4, lease_expires_at = least($5 + $4, run_deadline)"
    " WHERE queue = $1 AND id = $2 AND attempt = $3",
    {TEXTOID, INT8OID, INT4OID, INTERVALOID, TIMESTAMPTZOID});

// ------------------------------------------------------ end of an attempt

PreparedStatement read_for_fail(
    "SELECT c.attempt, j.max_attempts, j.cancel_requested,"
    "       extract(epoch FROM coalesce(q.backoff_base, '1 second'))::float8 AS backoff_base,"
    "       extract(epoch FROM coalesce(q.backoff_max, '1 hour'))::float8 AS backoff_max"
    "  FROM wf.job j, wf.claim c LEFT JOIN wf.queue_config q ON q.queue = $1"
    " WHERE " WF_SQL_TOKEN_HOLDS
    "   FOR NO KEY UPDATE OF j",
    {TEXTOID, INT8OID, INT4OID});

PreparedStatement record_failure(
    "WITH failed AS ("
    " UPDATE wf.job j SET status = $4, last_error = $5,"
    "       run_at = CASE WHEN $4 = 'pending' THEN now() + make_interval(secs => $6) ELSE j.run_at END,"
    "       finished_at = CASE WHEN $4 = 'pending' THEN NULL ELSE now() END," WF_SQL_END_ATTEMPT
    " RETURNING j.queue, j.priority, j.run_at, j.id, j.key, j.version, j.attempt, j.status,"
    "           j.workflow_id, j.child_of),"
    WF_SQL_END_CLAIM("failed") ","
    WF_SQL_ENTER_READY("failed", WF_SQL_IF_PENDING)
    " SELECT queue, id, status, workflow_id, child_of FROM failed",
    {TEXTOID, INT8OID, INT4OID, TEXTOID, TEXTOID, FLOAT8OID});

// ------------------------------------------------------------------- park

// The running attempt, locked: parking it must not race its completion or
// its recovery. Parking ends the claim without spending an attempt: its
// max_attempts grows by one, since the next claim counts one more.
PreparedStatement lock_running(
    "SELECT j.cancel_requested, j.workflow_id, j.version, j.child_of"
    "  FROM wf.job j, wf.claim c WHERE " WF_SQL_TOKEN_HOLDS
    " FOR NO KEY UPDATE OF j",
    {TEXTOID, INT8OID, INT4OID});

// Back to pending at $4 (its place in line). With an event name in $5, the
// event is delivered, signalled with payload $6.
PreparedStatement park_pending(
    "WITH parked AS ("
    " UPDATE wf.job j SET status = 'pending', run_at = $4, max_attempts = j.max_attempts + 1,"
    "        events = CASE WHEN $5::text IS NULL THEN j.events"
    "                      ELSE coalesce(j.events, '{}') || jsonb_build_object($5::text,"
    "                        jsonb_build_object('status', 'signalled', 'payload', $6::jsonb)) END,"
    WF_SQL_END_ATTEMPT
    "  RETURNING j.queue, j.priority, j.run_at, j.id, j.key, j.version),"
    WF_SQL_END_CLAIM("parked") ","
    WF_SQL_ENTER_READY("parked", "")
    " SELECT 1 FROM parked",
    {TEXTOID, INT8OID, INT4OID, TIMESTAMPTZOID, TEXTOID, JSONBOID});

PreparedStatement park_waiting(
    "WITH parked AS ("
    " UPDATE wf.job j SET status = 'waiting', max_attempts = j.max_attempts + 1,"
    WF_SQL_END_ATTEMPT
    "  RETURNING j.id),"
    WF_SQL_END_CLAIM("parked") ","
    " waits AS (INSERT INTO wf.event_wait (queue, id, attempt, event, timeout_at)"
    "           SELECT $1, $2, $3, $4, now() + $5 FROM parked"
    "           ON CONFLICT (queue, id) DO UPDATE SET attempt = excluded.attempt,"
    "              event = excluded.event, timeout_at = excluded.timeout_at, since = now())"
    " SELECT 1 FROM parked",
    {TEXTOID, INT8OID, INT4OID, TEXTOID, INTERVALOID});

// Wakes the jobs waiting on an event ($1) or whose timeout passed ($1
// NULL): wait rows first, then jobs, in every caller. A wait row of a job
// no longer waiting at that attempt (cancelled, say) is just removed.
PreparedStatement wake_parked_jobs(
    "WITH woken_waits AS ("
    "  DELETE FROM wf.event_wait w"
    "   WHERE ($1::text IS NOT NULL AND w.event = $1)"
    "      OR ($1::text IS NULL AND w.timeout_at <= $3)"
    "  RETURNING w.queue, w.id, w.attempt, w.event),"
    " woken AS ("
    "  UPDATE wf.job j SET status = 'pending', run_at = $3,"
    "         events = coalesce(j.events, '{}') || jsonb_build_object(w.event,"
    "           CASE WHEN $1::text IS NULL THEN jsonb_build_object('status', 'timed_out')"
    "                ELSE jsonb_build_object('status', 'signalled', 'payload', $2::jsonb) END)"
    "    FROM woken_waits w"
    "   WHERE j.queue = w.queue AND j.id = w.id AND j.attempt = w.attempt"
    "     AND j.status = 'waiting'"
    "  RETURNING j.queue, j.priority, j.run_at, j.id, j.key, j.version),"
    WF_SQL_ENTER_READY("woken", "")
    " SELECT queue, count(*) AS jobs FROM woken GROUP BY queue",
    {TEXTOID, JSONBOID, TIMESTAMPTZOID});

// Wakes the waits in CTE `due` (queue, id) whose job no other transaction
// holds -- a held one is woken at a later pass: the worker never waits --
// wait rows first, then jobs, each given DELIVERED (SQL of w.event) in its
// events. $1: now.
#define WF_SQL_WAKE_FREE_WAITS(DUE, WAIT_FILTER, DELIVERED) \
    "WITH due AS (" DUE ")," \
    " free AS (" \
    "  SELECT j.queue, j.id FROM due JOIN wf.job j ON j.queue = due.queue AND j.id = due.id" \
    "     FOR NO KEY UPDATE OF j SKIP LOCKED)," \
    " woken_waits AS (" \
    "  DELETE FROM wf.event_wait w USING free f" \
    "   WHERE w.queue = f.queue AND w.id = f.id" WAIT_FILTER \
    "  RETURNING w.queue, w.id, w.attempt, w.event)," \
    " woken AS (" \
    "  UPDATE wf.job j SET status = 'pending', run_at = $1," \
    "         events = coalesce(j.events, '{}') || jsonb_build_object(w.event, " DELIVERED ")" \
    "    FROM woken_waits w" \
    "   WHERE j.queue = w.queue AND j.id = w.id AND j.attempt = w.attempt" \
    "     AND j.status = 'waiting'" \
    "  RETURNING j.queue, j.priority, j.run_at, j.id, j.key, j.version)," \
    WF_SQL_ENTER_READY("woken", "") \
    " SELECT queue, count(*) AS jobs FROM woken GROUP BY queue"

// Timeouts take the job row first, as a child's delivery to a parent
// waiting on its children does (children.cpp), so the two never deadlock.
PreparedStatement wake_timed_out_jobs(
    WF_SQL_WAKE_FREE_WAITS("SELECT w.queue, w.id FROM wf.event_wait w WHERE w.timeout_at <= $1",
                           " AND w.timeout_at <= $1", "jsonb_build_object('status', 'timed_out')"),
    {TIMESTAMPTZOID});

// On a distributed pg_wf: the waits of one shard group whose event was
// signalled (the group's copy of wf.event says so) -- a wait that committed
// after the signal looked for waiters (steps.cpp).
PreparedStatement wake_signalled_waits(
    WF_SQL_WAKE_FREE_WAITS(
        "SELECT w.queue, w.id FROM wf.event_wait w JOIN wf.event e ON e.name = w.event"
        " WHERE e.signalled_at IS NOT NULL",
        "",
        "jsonb_build_object('status', 'signalled', 'payload',"
        " (SELECT e.payload FROM wf.event e WHERE e.name = w.event))"),
    {TIMESTAMPTZOID});

// Every await and signal of an event goes through its row (steps.cpp).
PreparedStatement record_signal(
    "INSERT INTO wf.event AS e (name, payload, signalled_at) VALUES ($1, $2, now())"
    " ON CONFLICT (name) DO UPDATE SET payload = excluded.payload,"
    "                                  signalled_at = excluded.signalled_at",
    {TEXTOID, JSONBOID});

// ---------------------------------------------------------------- recover

PreparedStatement running_owners(
    "SELECT DISTINCT owner_session FROM wf.claim WHERE queue <> ''", {});

// SQL: job row J runs attempt A, as 1.2 writes it or as a claim made by a
// 1.1 library (the server not restarted after the library was replaced).
#define WF_SQL_ROW_RUNS_ANY_VERSION(J, A) \
    "(" WF_SQL_ROW_RUNS(J, A) " OR (" J ".attempt = " A " AND " J ".status = 'running'))"

// The job row first, then its claim, as wf_complete does: no deadlock. A
// recovered job keeps its run_at, and so its place in line. The lost
// attempt counts: the job row takes its number.
PreparedStatement recover_statement(
    "WITH lost AS ("
    "  SELECT c.queue, c.id, c.attempt, c.owner_session = ANY($1) AS session_ended,"
    "         c.lease_expires_at, c.owner_pid, c.worker, c.started_at, c.run_deadline, c.progress"
    "    FROM wf.claim c"
    "   WHERE c.queue <> '' AND (c.owner_session = ANY($1) OR c.lease_expires_at < $2)),"
    // A job row another transaction holds (an enqueue that depends on it,
    // left open) is skipped, and recovered at a later pass: no user
    // transaction can hold up the recovery of every other job.
    " free AS ("
    "  SELECT lost.* FROM lost JOIN wf.job j ON j.queue = lost.queue AND j.id = lost.id"
    "   WHERE " WF_SQL_ROW_RUNS_ANY_VERSION("j", "lost.attempt")
    "     FOR NO KEY UPDATE OF j SKIP LOCKED),"
    " recovered AS ("
    "  UPDATE wf.job j SET"
    "    attempt = lost.attempt, worker = lost.worker, started_at = lost.started_at,"
    "    progress = coalesce(lost.progress, j.progress),"
    "    status = CASE WHEN j.cancel_requested THEN 'cancelled'"
    "                  WHEN lost.attempt >= j.max_attempts THEN 'failed' ELSE 'pending' END,"
    "    last_error = CASE WHEN lost.session_ended"
    "                 THEN format('worker lost: session (pid %s) ended during attempt %s',"
    "                             lost.owner_pid, lost.attempt)"
    "                 WHEN lost.run_deadline IS NOT NULL AND lost.lease_expires_at >= lost.run_deadline"
    // Seconds, not an interval's text: that would follow the IntervalStyle
    // of whichever session swept.
    "                 THEN format('timed out: attempt %s ran longer than its max_run_time (%s s)',"
    "                             lost.attempt, trim_scale(round(extract(epoch FROM"
    "                               lost.run_deadline - lost.started_at), 3)))"
    "                 ELSE format('worker lost: lease expired at %s during attempt %s',"
    "                             lost.lease_expires_at, lost.attempt) END,"
    "    finished_at = CASE WHEN j.cancel_requested OR lost.attempt >= j.max_attempts THEN $2 END"
    // Each job found by its key from one list: a join of two lists of
    // thousands of claims (a session that held them died) would compare
    // every one with every other.
    "   FROM free lost"
    "  WHERE j.queue = lost.queue AND j.id = lost.id AND "
    WF_SQL_ROW_RUNS_ANY_VERSION("j", "lost.attempt")
    "  RETURNING j.queue, j.priority, j.run_at, j.id, j.key, j.version, j.attempt, j.status,"
    "            j.workflow_id, j.child_of),"
    // With the claims recovered go lost ones that hold no job at all (a job
    // deleted by hand): otherwise each pass would look at them again.
    " released AS (DELETE FROM wf.claim c USING lost"
    "               WHERE c.queue = lost.queue AND c.id = lost.id AND c.attempt = lost.attempt"
    // (A hashed IN, not a correlated EXISTS over the CTE: linear.)
    "                 AND ((c.queue, c.id, c.attempt) IN (SELECT queue, id, attempt FROM recovered)"
    "                      OR NOT EXISTS (SELECT 1 FROM wf.job j"
    "                                      WHERE j.queue = c.queue AND j.id = c.id"
    "                                        AND " WF_SQL_ROW_RUNS_ANY_VERSION("j", "c.attempt") "))),"
    WF_SQL_ENTER_READY("recovered", WF_SQL_IF_PENDING)
    " SELECT queue, id, status, workflow_id, child_of FROM recovered",
    {INT8ARRAYOID, TIMESTAMPTZOID});

// wf.claim is unlogged: a crash (or a standby's promotion) empties it,
// sentinel row included. The sessions of the running jobs died with the
// server, and what is left of a claim is that its job is pending without a
// ready row (the claim's one durable write was removing it). Those jobs are
// recovered once, their lost attempt counted: a job that crashes the server
// each time it runs ends failed like any other, and the attempt number the
// lost worker holds is never handed out again.
PreparedStatement find_sentinel("SELECT 1 FROM wf.claim WHERE queue = '' AND id = 0", {});

// $2 says how the claims were lost. A row still marked running (written
// by a 1.1 library, its attempt already counted) was lost too. SENTINEL
// puts the sentinel back.
#define WF_RECOVER_ORPHANS_SQL(SENTINEL) \
    "WITH orphan AS (" \
    "  SELECT j.queue, j.id, j.attempt AS seen, j.status AS seen_status," \
    "         j.attempt + CASE WHEN j.status = 'running' THEN 0 ELSE 1 END AS attempt" \
    "    FROM wf.job j" \
    "   WHERE j.status = 'running'" \
    "      OR (j.status = 'pending'" \
    "          AND NOT EXISTS (SELECT 1 FROM wf.ready r WHERE " WF_SQL_READY_ROW_OF("j", "r") ")" \
    "          AND NOT EXISTS (SELECT 1 FROM wf.claim c" \
    "               WHERE c.queue = j.queue AND c.id = j.id AND " WF_SQL_ROW_RUNS("j", "c.attempt") ")))," \
    " recovered AS (" \
    "  UPDATE wf.job j SET attempt = o.attempt," \
    "    status = CASE WHEN j.cancel_requested THEN 'cancelled'" \
    "                  WHEN o.attempt >= j.max_attempts THEN 'failed' ELSE 'pending' END," \
    "    last_error = format('worker lost: %s during attempt %s', $2, o.attempt)," \
    "    finished_at = CASE WHEN j.cancel_requested OR o.attempt >= j.max_attempts THEN $1 END" \
    "   FROM orphan o" \
    "  WHERE j.queue = o.queue AND j.id = o.id AND j.attempt = o.seen AND j.status = o.seen_status" \
    "  RETURNING j.queue, j.priority, j.run_at, j.id, j.key, j.version, j.status," \
    "            j.workflow_id, j.child_of)," \
    WF_SQL_ENTER_READY("recovered", WF_SQL_IF_PENDING) "," \
    SENTINEL \
    " SELECT queue, id, status, workflow_id, child_of FROM recovered"

PreparedStatement recover_orphans(
    WF_RECOVER_ORPHANS_SQL(" sentinel AS (INSERT INTO wf.claim VALUES ('', 0, 0, 0) ON CONFLICT DO NOTHING)"),
    {TIMESTAMPTZOID, TEXTOID});

// On a distributed pg_wf the sentinel is one per shard group, in a table of
// each node's own (wf.group_sentinel, never distributed): a row in a shard
// of wf.claim must hash into the shard (Citus splits shards by it), and a
// group moved to a node is recovered there once.
PreparedStatement recover_group_orphans(
    WF_RECOVER_ORPHANS_SQL(" sentinel AS (INSERT INTO wf.group_sentinel VALUES ($3) ON CONFLICT DO NOTHING)"),
    {TIMESTAMPTZOID, TEXTOID, INT8OID});
PreparedStatement find_group_sentinel("SELECT 1 FROM wf.group_sentinel WHERE job_shard = $1", {INT8OID});
PreparedStatement forget_group_sentinels("DELETE FROM wf.group_sentinel WHERE job_shard <> ALL ($1)",
                                         {INT8ARRAYOID});

// Wakes claimers of recovered jobs; appends the jobs that ended for good.
int64 note_recovered(const Rows& rows, std::vector<int64>* finished) {
    note_ready_queues(rows, "status");
    for (uint64 r = 0; r < rows.size(); r++) count(rows.text_at(r, "queue"), Metric::recovered);
    jobs_ended(rows);
    for (uint64 r = 0; r < rows.size(); r++)
        if (rows.text_at(r, "status") != "pending") finished->push_back(rows.int64_at(r, "id"));
    return static_cast<int64>(rows.size());
}

// ------------------------------------------------------- operator actions

// wf_cancel locks the job row first, as completions, the reaper and
// wf_cancel_workflow do (a claim locks no job row). Locked, the job changes
// status only by a claim taking its ready row; so a pending job's ready row
// is taken next, waiting for a claimer that holds one. After that the job
// is running (that claimer committed: it is flagged) or its ready row is
// gone (taken here, or its claim was lost in a crash: it is cancelled).
PreparedStatement lock_job(
    "SELECT status = 'pending' AS pending, priority, run_at, key FROM wf.job"
    " WHERE queue = $1 AND id = $2 FOR NO KEY UPDATE",
    {TEXTOID, INT8OID});

// The key of a pending job's ready row is its own priority and run_at. Its
// flow key is named too, in the form each index can descend on: with only
// (queue, priority, run_at, id), a generic plan may walk wf.ready_key_order
// (queue, key, ...) over every row of the queue -- a cancel of n jobs in
// one transaction was quadratic.
PreparedStatement leave_ready_set(
    "DELETE FROM wf.ready WHERE queue = $1 AND key = $5 AND priority = $3 AND run_at = $4"
    "   AND id = $2",
    {TEXTOID, INT8OID, INT4OID, TIMESTAMPTZOID, TEXTOID});
PreparedStatement leave_ready_set_keyless(
    "DELETE FROM wf.ready WHERE queue = $1 AND key IS NULL AND priority = $3 AND run_at = $4"
    "   AND id = $2",
    {TEXTOID, INT8OID, INT4OID, TIMESTAMPTZOID});

// A running job is only flagged (it stays pending in its row).
#define WF_SQL_CANCEL_OR_FLAG(J, REASON)                                                   \
    " status = CASE WHEN " WF_SQL_JOB_RUNNING(J) " THEN " J ".status ELSE 'cancelled' END," \
    " cancel_requested = " WF_SQL_JOB_RUNNING(J) ","                                       \
    " finished_at = CASE WHEN " WF_SQL_JOB_RUNNING(J) " THEN NULL ELSE now() END,"         \
    " last_error = CASE WHEN " WF_SQL_JOB_RUNNING(J) " THEN " J ".last_error ELSE " REASON " END"

// A failed job may be cancelled too: given up for good (in an ordered
// group, the next job becomes the head); its error stays in last_error.
PreparedStatement cancel_statement(
    "UPDATE wf.job j SET" WF_SQL_CANCEL_OR_FLAG("j",
        "CASE WHEN j.status = 'failed' THEN 'cancelled after it failed: ' || j.last_error"
        " ELSE 'cancelled' END")
    " WHERE j.queue = $1 AND j.id = $2"
    "   AND j.status IN ('blocked', 'pending', 'waiting', 'failed') AND NOT j.cancel_requested"
    " RETURNING j.queue, j.id, j.status, j.workflow_id, j.child_of",
    {TEXTOID, INT8OID});

// A failed or cancelled dependency of a job about to be retried: the retry
// would leave it blocked on a job that never runs again.
PreparedStatement dead_dependency(
    "SELECT p.id, p.status FROM wf.job me, wf.job p"
    " WHERE me.queue = $1 AND me.id = $2 AND me.status IN ('failed', 'cancelled')"
    "   AND p.id = ANY (me.depends_on) AND p.status IN ('failed', 'cancelled')"
    " ORDER BY p.id LIMIT 1",
    {TEXTOID, INT8OID});

// Back from the dead letter with a fresh budget of attempts. The attempt
// counter itself never goes back: it is the fencing token.
PreparedStatement retry_statement(
    "WITH retried AS ("
    " UPDATE wf.job j"
    "   SET status = CASE WHEN u.unfinished + $3 > 0 THEN 'blocked' ELSE 'pending' END,"
    "       pending_deps = u.unfinished + $3, max_attempts = j.attempt + j.attempt_budget,"
    "       run_at = now(), finished_at = NULL, cancelled_by = NULL, cancel_requested = false"
    "  FROM (SELECT count(*) FILTER (WHERE p.status <> 'done') AS unfinished"
    "          FROM wf.job p, wf.job me"
    "         WHERE me.queue = $1 AND me.id = $2 AND p.id = ANY(me.depends_on)) AS u"
    " WHERE j.queue = $1 AND j.id = $2 AND j.status IN ('failed', 'cancelled')"
    " RETURNING j.queue, j.priority, j.run_at, j.id, j.key, j.version, j.status)"
    WF_SQL_FORGIVE_DEBTS("retried") ","
    WF_SQL_ENTER_READY("retried", WF_SQL_IF_PENDING)
    " SELECT status FROM retried",
    {TEXTOID, INT8OID, INT4OID});

// Cancelling a workflow. Its unfinished steps are locked first, in
// (queue, id) order as completions lock the children they release: none of
// them changes status until this transaction ends, except that a claimer
// may still take a pending step's ready row (a claim locks no job row).
// So their ready rows are taken next, waiting for a claimer that holds one:
// after its commit that step is running, and is flagged. Only the steps
// locked here are touched.
PreparedStatement lock_workflow(
    "SELECT id FROM wf.job WHERE workflow_id = $1"
    "   AND status IN ('blocked', 'pending', 'waiting')"
    " ORDER BY queue, id FOR NO KEY UPDATE",
    {UUIDOID});

PreparedStatement unready_workflow(
    "DELETE FROM wf.ready r"
    " WHERE r.ctid = ANY (ARRAY("
    "   SELECT c.ctid FROM wf.job j JOIN wf.ready c ON " WF_SQL_READY_ROW_OF("j", "c")
    "    WHERE j.id = ANY ($1) AND j.status = 'pending'"
    "      FOR UPDATE OF c))",
    {INT8ARRAYOID});

// Then, in a statement of its own (a fresh snapshot, after those waits):
// the pending steps that are not running have no ready row left -- taken
// above, or lost with a claim in a crash -- and are cancelled. Locked, none
// of them can gain a ready row or a claim meanwhile.
PreparedStatement idle_steps(
    "SELECT j.id FROM wf.job j"
    " WHERE j.id = ANY ($1) AND j.status = 'pending' AND NOT " WF_SQL_JOB_RUNNING("j")
    "   AND NOT EXISTS (SELECT 1 FROM wf.ready r WHERE " WF_SQL_READY_ROW_OF("j", "r") ")",
    {INT8ARRAYOID});

PreparedStatement cancel_steps(
    "UPDATE wf.job j SET" WF_SQL_CANCEL_OR_FLAG("j", "'workflow cancelled'")
    " WHERE j.id = ANY ($1)"
    "   AND (j.status IN ('blocked', 'waiting') OR j.id = ANY ($2)"
    "        OR (" WF_SQL_JOB_RUNNING("j") " AND NOT j.cancel_requested))"
    " RETURNING j.id, j.status = 'cancelled' AND j.has_dependents AS cancelled_parent,"
    "           j.queue, j.status, j.workflow_id, j.child_of",
    {INT8ARRAYOID, INT8ARRAYOID});

// Of the steps just cancelled, those with a blocked dependent left: a job
// outside the workflow that depends on them (the workflow's own steps are
// cancelled already).
PreparedStatement parents_of_outsiders(
    "SELECT DISTINCT d.parent_id FROM wf.dependency d"
    "  JOIN wf.job c ON c.queue = d.child_queue AND c.id = d.child_id"
    " WHERE d.parent_id = ANY ($1) AND c.status = 'blocked'",
    {INT8ARRAYOID});

PreparedStatement mark_workflow_cancelled(
    "UPDATE wf.workflow SET cancelled_at = coalesce(cancelled_at, now()) WHERE id = $1",
    {UUIDOID});

// ------------------------------------------------------------ flow control

// Dedup windows. The key's row is taken (or made) and locked: a racing
// enqueue with the same key waits here until this one commits. job_id 0:
// the row is new, and the job about to be inserted will hold it.
PreparedStatement lock_dedup_slot(
    "INSERT INTO wf.dedup AS d (queue, dedup_key, job_id) VALUES ($1, $2, 0)"
    " ON CONFLICT (queue, dedup_key) DO UPDATE SET job_id = d.job_id"
    " RETURNING d.job_id",
    {TEXTOID, TEXTOID});

// Read with the latest snapshot: the holder may have been enqueued by the
// racing transaction this one just waited for.
PreparedStatement dedup_holder_status(
    "SELECT status FROM wf.job WHERE queue = $1 AND id = $2", {TEXTOID, INT8OID});

PreparedStatement set_dedup_holder(
    "UPDATE wf.dedup SET job_id = $3 WHERE queue = $1 AND dedup_key = $2",
    {TEXTOID, TEXTOID, INT8OID});

// Debounce: the job row first (as wf_cancel), then its ready row, which a
// claimer may hold (then the job has started and keeps its payload).
PreparedStatement lock_pending_job(
    "SELECT 1 FROM wf.job WHERE queue = $1 AND id = $2 AND status = 'pending'"
    " FOR NO KEY UPDATE",
    {TEXTOID, INT8OID});

PreparedStatement replace_pending_job(
    "WITH gone AS ("
    "  DELETE FROM wf.ready r USING wf.job j"
    "   WHERE j.queue = $1 AND j.id = $2 AND j.status = 'pending' AND " WF_SQL_READY_ROW_OF("j", "r")
    "  RETURNING r.id),"
    " changed AS ("
    "  UPDATE wf.job j SET payload = $3, run_at = coalesce($4, now())"
    "   WHERE j.queue = $1 AND j.id IN (SELECT id FROM gone)"
    "  RETURNING j.queue, j.priority, j.run_at, j.id, j.key, j.version),"
    WF_SQL_ENTER_READY("changed", "")
    " SELECT count(*) AS replaced FROM changed",
    {TEXTOID, INT8OID, JSONBOID, TIMESTAMPTZOID});

// Start-by deadlines, from the deadline index: jobs that never started
// (attempt 0), blocked or pending and not running, whose start_by passed.
// A job whose ready row a claim holds is left to that claim (its check of
// start_by decides); one another transaction holds is skipped, and the
// earliest deadline skipped is where the next pass looks from ($2 is the
// last pass's).
PreparedStatement fail_unstarted(
    "WITH candidate AS ("
    "  SELECT j.queue, j.id, j.start_by FROM wf.job j"
    "   WHERE j.start_by IS NOT NULL AND j.start_by <= $1 AND j.start_by >= $2"
    "     AND j.attempt = 0 AND j.status IN ('pending', 'blocked')),"
    " expired AS ("
    "  SELECT j.queue, j.id, j.status, j.priority, j.run_at FROM wf.job j, candidate c"
    "   WHERE j.queue = c.queue AND j.id = c.id AND j.attempt = 0"
    "     AND j.status IN ('pending', 'blocked') AND NOT " WF_SQL_JOB_RUNNING("j")
    "     FOR NO KEY UPDATE OF j SKIP LOCKED),"
    " unready AS ("
    "  DELETE FROM wf.ready r USING expired e"
    "   WHERE e.status = 'pending' AND " WF_SQL_READY_ROW_OF("e", "r")
    "  RETURNING r.queue, r.id),"
    // Pending ones whose ready row was there and is gone now (a claim took it
    // meanwhile) have started: left alone.
    " had_ready AS ("
    "  SELECT e.queue, e.id FROM expired e"
    "   WHERE e.status = 'pending' AND EXISTS (SELECT 1 FROM wf.ready r WHERE "
    WF_SQL_READY_ROW_OF("e", "r") ")),"
    " failed AS ("
    "  UPDATE wf.job j SET status = 'failed', finished_at = $1,"
    // In UTC and ISO 8601, whatever the sweeping session's settings.
    "         last_error = format('not started by its start_by deadline (%s)',"
    "                             to_char(j.start_by AT TIME ZONE 'UTC',"
    "                                     'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'))"
    "    FROM expired e"
    "   WHERE j.queue = e.queue AND j.id = e.id"
    "     AND (e.status = 'blocked' OR (e.queue, e.id) IN (SELECT queue, id FROM unready)"
    "          OR (e.queue, e.id) NOT IN (SELECT queue, id FROM had_ready))"
    "  RETURNING j.queue, j.id, j.status, j.workflow_id, j.child_of)"
    // One row per job failed, or one with id NULL; each with skipped_from:
    // the earliest deadline of a job skipped, or left to a claim that held
    // its ready row (looked at again: a claim that finds the job too late
    // uses the row up without starting it, and the next pass fails it).
    " SELECT f.queue, f.id, f.status, f.workflow_id, f.child_of, s.skipped_from"
    "   FROM (SELECT min(start_by) AS skipped_from FROM candidate c"
    "          WHERE (c.queue, c.id) NOT IN (SELECT queue, id FROM expired)"
    "             OR ((c.queue, c.id) IN (SELECT queue, id FROM had_ready)"
    "                 AND (c.queue, c.id) NOT IN (SELECT queue, id FROM unready))) AS s"
    "   LEFT JOIN failed f ON true",
    {TIMESTAMPTZOID, TIMESTAMPTZOID});

}  // namespace

// ---------------------------------------------------------------- enqueue

namespace {
// The lock of a workflow id while a child workflow is created.
LOCKTAG child_workflow_lock(const pg_uuid_t& workflow_id) {
    return hashed_lock_tag(LockSpace::child_workflow, workflow_id.data, UUID_LEN);
}
}  // namespace

void lock_new_child_workflow(const pg_uuid_t& workflow_id) {
    call([&] {
        LOCKTAG tag = child_workflow_lock(workflow_id);
        (void)LockAcquire(&tag, ExclusiveLock, /*sessionLock=*/false, /*dontWait=*/false);
    });
}

std::optional<int64> child_workflow_parent(Datum workflow_id) {
    LOCKTAG tag = child_workflow_lock(*DatumGetUUIDP(workflow_id));
    call([&] { (void)LockAcquire(&tag, ShareLock, false, false); });
    Params<1> w;
    w.set(0, workflow_id);
    Rows parent = workflow_parent.execute_latest(w.values, w.nulls);
    call([&] { LockRelease(&tag, ShareLock, false); });
    if (parent.empty() || parent.is_null(0, "child_of")) return std::nullopt;
    return parent.int64_at(0, "child_of");
}

std::optional<int64> insert_job(const NewJob& job, std::optional<int64> child_of) {
    int64 id;
    if (job.idempotency_key) {
        // ON CONFLICT waits for a racing insert of the key, then does nothing.
        Params<19> p;
        p.set(0, job.queue);
        p.set(1, text_datum(job.status));
        p.set(2, job.payload);
        p.set_or_null(3, !job.run_at, job.run_at.value_or(0));
        p.set(4, Int32GetDatum(job.priority));
        p.set(5, Int32GetDatum(job.max_attempts));
        p.set(6, *job.idempotency_key);
        p.set_or_null(7, !job.workflow_id, job.workflow_id.value_or(0));
        p.set_or_null(8, !job.step_name, job.step_name.value_or(0));
        p.set_or_null(9, job.depends_on.empty(), job.depends_on.empty() ? 0 : int8_array(job.depends_on));
        p.set(10, Int32GetDatum(job.pending_deps));
        p.set_or_null(11, job.last_error.empty(), job.last_error.empty() ? 0 : text_datum(job.last_error));
        p.set_or_null(12, job.cancelled_by == 0, Int64GetDatum(job.cancelled_by));
        p.set_or_null(13, !job.key, job.key.value_or(0));
        p.set_or_null(14, !job.dedup_key, job.dedup_key.value_or(0));
        p.set_or_null(15, !job.max_run_time, job.max_run_time.value_or(0));
        p.set_or_null(16, !job.start_by, job.start_by.value_or(0));
        p.set_or_null(17, !job.version, job.version.value_or(0));
        p.set_or_null(18, !child_of, Int64GetDatum(child_of.value_or(0)));
        Rows rows = insert_job_with_idempotency_key.execute(p.values, p.nulls);
        if (rows.empty()) return std::nullopt;
        id = rows.int64_at(0, "id");
    } else {
        id = call([&] {
            JobInserts inserts;
            inserts.open("wf_enqueue");
            int64 new_id = inserts.add(job, Int64GetDatum(child_of.value_or(0)), !child_of);
            inserts.flush();
            inserts.close();
            return new_id;
        });
    }
    count(text_view(job.queue), Metric::enqueued);
    if (std::strcmp(job.status, "pending") == 0) note_queue_ready(text_view(job.queue));
    return id;
}

std::optional<KeyHolder> find_job_by_key(Datum queue, Datum key, Datum payload) {
    Params<3> p;
    p.set(0, queue);
    p.set(1, key);
    p.set(2, payload);
    Rows rows = find_by_key.execute(p.values, p.nulls);
    if (rows.size() != 1) return std::nullopt;
    return KeyHolder{rows.int64_at(0, "id"), rows.bool_at(0, "same_payload")};
}

std::vector<int64> insert_pending_jobs(Datum queue, Datum payloads, int32 max_attempts,
                                       std::optional<Datum> keys, std::optional<Datum> version,
                                       bool key_order) {
    Jsonb* array = call([&] { return DatumGetJsonbP(payloads); });
    std::vector<int64> ids(JB_ROOT_COUNT(array));
    if (ids.empty()) return ids;
    NewJob job;
    job.queue = queue;
    job.max_attempts = max_attempts;
    job.version = version;
    job.key_order = key_order;
    int64* next_id = ids.data();
    call([&] {
        // One key (or NULL) per payload, in the same place (checked by
        // the caller).
        Datum* key_values = nullptr;
        bool* key_nulls = nullptr;
        int key_count = 0;
        if (keys)
            deconstruct_array(DatumGetArrayTypeP(*keys), TEXTOID, -1, false, TYPALIGN_INT, &key_values,
                              &key_nulls, &key_count);
        JobInserts inserts;
        inserts.open("wf_enqueue_batch");
        JsonbIterator* it = JsonbIteratorInit(&array->root);
        JsonbValue element;
        JsonbIteratorToken token;
        int n = 0;
        while ((token = JsonbIteratorNext(&it, &element, true)) != WJB_DONE) {
            if (token != WJB_ELEM) continue;
            // The element as a jsonb of its own, with the rows it goes in
            // (freed once they are written).
            MemoryContext outer = MemoryContextSwitchTo(inserts.rows);
            job.payload = JsonbPGetDatum(JsonbValueToJsonb(&element));
            MemoryContextSwitchTo(outer);
            if (n < key_count && !key_nulls[n])
                job.key = key_values[n];
            else
                job.key.reset();
            next_id[n++] = inserts.add(job, 0, true);
        }
        inserts.flush();
        inserts.close();
    });
    note_queue_ready(text_view(queue));
    count(text_view(queue), Metric::enqueued, static_cast<int64>(ids.size()));
    return ids;
}

// ----------------------------------------------------------- flow control

std::optional<int64> lock_dedup_key(Datum queue, Datum dedup_key) {
    Params<2> p;
    p.set(0, queue);
    p.set(1, dedup_key);
    int64 holder = lock_dedup_slot.execute(p.values, p.nulls).int64_at(0, "job_id");
    if (holder == 0) return std::nullopt;
    p.set(1, Int64GetDatum(holder));
    Rows job = dedup_holder_status.execute_latest(p.values, p.nulls);
    if (job.empty()) return std::nullopt;
    std::string status = job.text_at(0, "status");
    if (status == "blocked" || status == "pending" || status == "waiting") return holder;
    return std::nullopt;
}

void hold_dedup_key(Datum queue, Datum dedup_key, int64 id) {
    Params<3> p;
    p.set(0, queue);
    p.set(1, dedup_key);
    p.set(2, Int64GetDatum(id));
    set_dedup_holder.execute(p.values, p.nulls);
}

bool replace_ready_job(Datum queue, int64 id, Datum payload, std::optional<Datum> run_at) {
    Params<4> p;
    p.set(0, queue);
    p.set(1, Int64GetDatum(id));
    if (lock_pending_job.execute(p.values, p.nulls).empty()) return false;
    p.set(2, payload);
    p.set_or_null(3, !run_at, run_at.value_or(0));
    if (replace_pending_job.execute(p.values, p.nulls).int64_at(0, "replaced") == 0) return false;
    note_queue_ready(text_view(queue));
    return true;
}

int64 fail_unstarted_jobs(std::vector<int64>* finished) {
    // Where this backend's last pass left off: deadlines before it were
    // seen (the first pass of a backend looks at all of them).
    static TimestampTz look_from = DT_NOBEGIN;
    TimestampTz now = GetCurrentTimestamp();
    Params<2> p;
    p.set(0, TimestampTzGetDatum(now));
    p.set(1, TimestampTzGetDatum(look_from));
    Rows rows = fail_unstarted.execute(p.values, p.nulls);
    jobs_ended(rows);
    look_from = rows.is_null(0, "skipped_from")
                    ? now
                    : std::min(now, DatumGetTimestampTz(rows.datum(0, "skipped_from")));
    int64 failed = 0;
    for (uint64 r = 0; r < rows.size(); r++) {
        if (rows.is_null(r, "id")) continue;
        finished->push_back(rows.int64_at(r, "id"));
        failed++;
    }
    return failed;
}

// ------------------------------------------------------------------ claim

namespace {

// Fills in the inputs and checkpoints of the claimed jobs that have any to
// read (claim_rows.hpp leaves them NULL): one statement for all of them,
// none when no job has any (a plain queue's claim runs no SQL).
void read_inputs_and_checkpoints(Datum queue, std::vector<ClaimedJob>* jobs) {
    std::vector<Datum> ids, inputs, checkpoints;
    std::unordered_map<int64, size_t> where;
    for (size_t i = 0; i < jobs->size(); i++) {
        const ClaimedJob& job = (*jobs)[i];
        if (!job.reads_inputs && !job.reads_checkpoints) continue;
        where[job.id] = i;
        ids.push_back(Int64GetDatum(job.id));
        inputs.push_back(BoolGetDatum(job.reads_inputs));
        checkpoints.push_back(BoolGetDatum(job.reads_checkpoints));
    }
    if (ids.empty()) return;
    std::vector<bool> no_nulls(ids.size(), false);
    Params<4> p;
    p.set(0, queue);
    p.set(1, datum_array(ids, no_nulls, INT8OID));
    p.set(2, datum_array(inputs, no_nulls, BOOLOID));
    p.set(3, datum_array(checkpoints, no_nulls, BOOLOID));
    Rows rows = (routed_with_cross_group_dependencies() ? claim_reads_in_group : claim_reads)
                    .execute(p.values, p.nulls);
    for (uint64 r = 0; r < rows.size(); r++) {
        ClaimedJob& job = (*jobs)[where.at(rows.int64_at(r, "id"))];
        // Inputs read by the claim itself (claim_rows.cpp) are kept.
        if (job.reads_inputs) {
            job.nulls[kClaimInputs] = rows.is_null(r, "inputs");
            if (!job.nulls[kClaimInputs]) job.values[kClaimInputs] = rows.datum(r, "inputs");
        }
        job.nulls[kClaimCheckpoints] = rows.is_null(r, "checkpoints");
        if (!job.nulls[kClaimCheckpoints]) job.values[kClaimCheckpoints] = rows.datum(r, "checkpoints");
    }
}

}  // namespace

std::vector<ClaimedJob> claim_jobs(Datum queue, const ClaimOwner& owner, int limit,
                                   const FlowControl* flow, long* retry_after_ms,
                                   const std::vector<Datum>* versions) {
    std::vector<ClaimedJob> jobs;
    if (retry_after_ms) *retry_after_ms = -1;
    if (limit <= 0) return jobs;
    Datum now;
    std::vector<ReadyRow> ready;
    if (versions && flow && flow->any()) {
        throw core::Error("0A000",
                          "queue \"" + std::string(text_view(queue)) +
                              "\" has flow control: claims cannot choose versions there",
                          "Rate limits, per-key limits, fair and ordered claims walk the ready "
                          "set key by key, not version by version.",
                          "Claim without versions, or run the versions in separate queues.");
    } else if (versions) {
        now = clock_now();
        ready = take_ready_rows_of_versions(queue, DatumGetTimestampTz(now), limit, *versions);
    } else if (flow && flow->any()) {
        FlowPick pick = take_with_flow_control(queue, text_view(queue), limit, *flow);
        now = TimestampTzGetDatum(pick.at);
        ready = std::move(pick.rows);
        if (retry_after_ms) *retry_after_ms = pick.retry_after_ms;
    } else {
        now = clock_now();
        ready = take_ready_rows(queue, DatumGetTimestampTz(now), limit);
    }
    if (ready.empty()) return jobs;
    count(text_view(queue), Metric::claimed, static_cast<int64>(ready.size()));
    jobs = start_attempts(queue, owner, DatumGetTimestampTz(now), ready);
    read_inputs_and_checkpoints(queue, &jobs);
    std::sort(jobs.begin(), jobs.end(), [](const ClaimedJob& a, const ClaimedJob& b) {
        if (a.priority != b.priority) return a.priority > b.priority;
        if (a.run_at != b.run_at) return a.run_at < b.run_at;
        return a.id < b.id;
    });
    return jobs;
}

int64 count_running(Datum queue) {
    Params<1> p;
    p.set(0, queue);
    return count_running_statement.execute_latest(p.values, p.nulls).int64_at(0, "running");
}

long ms_until_next_due(Datum queue) {
    Params<2> p;
    p.set(0, queue);
    p.set(1, clock_now());
    Rows rows = next_due.execute(p.values, p.nulls);
    bool none = rows.is_null(0, "due");
    TimestampTz due = none ? 0 : DatumGetTimestampTz(rows.datum(0, "due"));
    // A long wait runs this once per wake-up: free each result at once.
    rows.free();
    if (none) return -1;
    long ms = static_cast<long>((due - GetCurrentTimestamp()) / 1000) + 1;
    return std::max(ms, 1L);
}

bool heartbeat(const FencingToken& token, const Interval* extend) {
    Params<5> p = token_params<5>(token);
    Rows claim = read_claim.execute(p.values, p.nulls);
    if (claim.size() != 1 || claim.bool_at(0, "cancel_requested") || claim.bool_at(0, "overdue"))
        return false;
    bool has_lease = !claim.is_null(0, "lease");
    if (!has_lease && extend == nullptr) return true;  // ownership is the session
    p.set(3, extend ? PointerGetDatum(extend) : claim.datum(0, "lease"));
    p.set(4, clock_now());
    return extend_lease.execute(p.values, p.nulls).size() == 1;
}

// ------------------------------------------------------ end of an attempt

namespace {

// What follows the completion of `completed` (job_rows.hpp) in `queue`:
// dependents released or cancelled, waiters woken, child workflows settled.
void after_completion(std::string_view queue, const std::vector<CompletedJob>& completed) {
    std::vector<int64> parents_done, cancelled_parents;
    std::vector<EndedJob> ended;
    ended.reserve(completed.size());
    for (const CompletedJob& c : completed) {
        if (c.has_dependents) (c.done ? parents_done : cancelled_parents).push_back(c.id);
        ended.push_back(EndedJob{queue, c.id, c.done ? EndedJob::done : EndedJob::cancelled,
                                 c.in_workflow, c.workflow_id, c.has_child_of});
    }
    release_dependents(parents_done);
    if (!cancelled_parents.empty()) cancel_dependents(cancelled_parents, "was cancelled");
    jobs_ended(ended);
    // A slot under max_running is free again.
    if (!completed.empty()) note_queue_ready(queue);
}

}  // namespace

bool complete_job(const FencingToken& token, std::optional<Datum> result, bool* done_out) {
    std::vector<AttemptToComplete> items{{token.id, token.attempt, result.value_or(0), !result}};
    std::vector<CompletedJob> completed;
    if (complete_running_attempts("wf_complete", token.queue, items, &completed) != 1) return false;
    if (done_out) *done_out = completed[0].done;
    after_completion(token.queue_name, completed);
    return true;
}

std::vector<int64> complete_jobs(Datum queue, Datum ids, Datum attempts,
                                 std::optional<Datum> results, size_t count) {
    std::vector<AttemptToComplete> items(count);
    AttemptToComplete* item = items.data();
    call([&] {
        Datum* id_values;
        Datum* attempt_values;
        Datum* result_values = nullptr;
        bool* result_nulls = nullptr;
        int n;
        deconstruct_array(DatumGetArrayTypeP(ids), INT8OID, sizeof(int64), FLOAT8PASSBYVAL,
                          TYPALIGN_DOUBLE, &id_values, nullptr, &n);
        deconstruct_array(DatumGetArrayTypeP(attempts), INT4OID, sizeof(int32), true, TYPALIGN_INT,
                          &attempt_values, nullptr, &n);
        if (results)
            deconstruct_array(DatumGetArrayTypeP(*results), JSONBOID, -1, false, TYPALIGN_INT,
                              &result_values, &result_nulls, &n);
        for (size_t i = 0; i < count; i++)
            item[i] = AttemptToComplete{DatumGetInt64(id_values[i]), DatumGetInt32(attempt_values[i]),
                                        result_values ? result_values[i] : 0,
                                        result_values ? result_nulls[i] : true};
    });
    // In id order, as every transaction locks job rows.
    std::stable_sort(items.begin(), items.end(),
                     [](const AttemptToComplete& a, const AttemptToComplete& b) { return a.id < b.id; });
    std::vector<CompletedJob> completed;
    complete_running_attempts("wf_complete_many", queue, items, &completed);
    after_completion(text_view(queue), completed);
    std::vector<int64> done;
    for (const CompletedJob& c : completed)
        if (c.done) done.push_back(c.id);
    return done;
}

const char* fail_job(const FencingToken& token, Datum error, std::optional<double> retry_in_seconds,
                     bool permanent) {
    Params<6> p = token_params<6>(token);
    Rows claim = read_for_fail.execute(p.values, p.nulls);
    if (claim.size() != 1) return nullptr;
    int attempt = claim.int32_at(0, "attempt");
    int max_attempts = claim.int32_at(0, "max_attempts");
    core::BackoffSettings backoff;
    backoff.base_seconds = DatumGetFloat8(claim.datum(0, "backoff_base"));
    backoff.max_seconds = DatumGetFloat8(claim.datum(0, "backoff_max"));

    const char* status = "pending";
    double delay = 0;
    if (claim.bool_at(0, "cancel_requested"))
        status = "cancelled";
    else if (core::classify_failure(attempt, max_attempts, permanent) == core::FailOutcome::dead_letter)
        status = "failed";
    else if (retry_in_seconds)
        delay = *retry_in_seconds;
    else
        delay = core::backoff_seconds(backoff, attempt, pg_prng_double(&pg_global_prng_state));

    p.set(3, text_datum(status));
    p.set(4, error);
    p.set(5, Float8GetDatum(delay));
    Rows ended = record_failure.execute(p.values, p.nulls);
    if (std::strcmp(status, "pending") == 0) count(token.queue_name, Metric::retried);
    if (std::strcmp(status, "pending") != 0)
        cancel_dependents({token.id}, std::strcmp(status, "failed") == 0 ? "failed" : "was cancelled");
    jobs_ended(ended);
    // Ready again (after the delay), or a max_running slot freed.
    note_queue_ready(token.queue_name);
    return status;
}

// ------------------------------------------------------------------- park

RunningAttempt running_attempt_of(const Rows& rows) {
    RunningAttempt attempt;
    attempt.cancel_requested = rows.bool_at(0, "cancel_requested");
    if (!rows.is_null(0, "workflow_id")) attempt.workflow_id = rows.uuid_at(0, "workflow_id");
    if (!rows.is_null(0, "version")) attempt.version = rows.text_at(0, "version");
    if (!rows.is_null(0, "child_of")) attempt.child_of = rows.int64_at(0, "child_of");
    return attempt;
}

std::optional<RunningAttempt> lock_running_attempt(const FencingToken& token) {
    Params<3> p = token_params<3>(token);
    Rows rows = lock_running.execute(p.values, p.nulls);
    if (rows.size() != 1) return std::nullopt;
    return running_attempt_of(rows);
}

void park_as_pending(const FencingToken& token, Datum run_at, std::optional<Datum> event,
                     std::optional<Datum> payload) {
    Params<6> p = token_params<6>(token);
    p.set(3, run_at);
    p.set_or_null(4, !event, event.value_or(0));
    p.set_or_null(5, !payload, payload.value_or(0));
    park_pending.execute(p.values, p.nulls);
    // Claimers waiting on the queue take it, or recompute when it is due.
    note_queue_ready(token.queue_name);
}

void park_as_waiting(const FencingToken& token, Datum event, const Interval* timeout) {
    Params<5> p = token_params<5>(token);
    p.set(3, event);
    p.set_or_null(4, timeout == nullptr, PointerGetDatum(timeout));
    park_waiting.execute(p.values, p.nulls);
    // A max_running slot is free again.
    note_queue_ready(token.queue_name);
}

int64 wake_waiting_jobs(std::optional<Datum> event, std::optional<Datum> payload) {
    Params<3> p;
    p.set_or_null(0, !event, event.value_or(0));
    p.set_or_null(1, !payload, payload.value_or(0));
    p.set(2, clock_now());
    Params<1> t;
    t.set(0, p.values[2]);
    Rows woken = event ? wake_parked_jobs.execute(p.values, p.nulls)
                       : wake_timed_out_jobs.execute(t.values, t.nulls);
    note_ready_queues(woken);
    int64 jobs = 0;
    for (uint64 r = 0; r < woken.size(); r++) jobs += woken.int64_at(r, "jobs");
    return jobs;
}

int64 wake_signalled_jobs() {
    Params<1> p;
    p.set(0, clock_now());
    Rows woken = wake_signalled_waits.execute(p.values, p.nulls);
    note_ready_queues(woken);
    int64 jobs = 0;
    for (uint64 r = 0; r < woken.size(); r++) jobs += woken.int64_at(r, "jobs");
    return jobs;
}

int64 signal_event(Datum event, std::optional<Datum> payload) {
    Params<2> p;
    p.set(0, event);
    p.set_or_null(1, !payload, payload.value_or(0));
    record_signal.execute(p.values, p.nulls);
    return wake_waiting_jobs(event, payload);
}

// ---------------------------------------------------------------- recover

std::vector<int64> claim_owner_keys() {
    return running_owners.execute().int64_column("owner_session");
}

int64 recover_claims(const std::vector<int64>& dead_owners, std::vector<int64>* finished) {
    Params<2> p;
    p.set(0, int8_array(dead_owners));
    p.set(1, clock_now());
    return note_recovered(recover_statement.execute(p.values, p.nulls), finished);
}

bool claims_survived() {
    ShardGroup* group = current_shard_group();
    if (group == nullptr) return !find_sentinel.execute().empty();
    Params<1> p;
    p.set(0, Int64GetDatum(group->job_shard));
    return !find_group_sentinel.execute(p.values, p.nulls).empty();
}

void forget_groups_elsewhere(const std::vector<int64>& local_job_shards) {
    Params<1> p;
    p.set(0, int8_array(local_job_shards));
    forget_group_sentinels.execute(p.values, p.nulls);
}

int64 recover_lost_claims(const char* how, std::vector<int64>* finished) {
    Params<3> p;
    p.set(0, clock_now());
    p.set(1, text_datum(how));
    ShardGroup* group = current_shard_group();
    if (group == nullptr) return note_recovered(recover_orphans.execute(p.values, p.nulls), finished);
    p.set(2, Int64GetDatum(group->job_shard));
    return note_recovered(recover_group_orphans.execute(p.values, p.nulls), finished);
}

// ------------------------------------------------------- operator actions

bool cancel_job(Datum queue, int64 id) {
    Params<5> p;
    p.set(0, queue);
    p.set(1, Int64GetDatum(id));
    Rows job = lock_job.execute(p.values, p.nulls);
    if (job.size() != 1) return false;
    if (job.bool_at(0, "pending")) {
        p.set(2, job.datum(0, "priority"));
        p.set(3, job.datum(0, "run_at"));
        if (job.is_null(0, "key")) {
            leave_ready_set_keyless.execute(p.values, p.nulls);
        } else {
            p.set(4, job.datum(0, "key"));
            leave_ready_set.execute(p.values, p.nulls);
        }
    }
    Rows cancelled = cancel_statement.execute(p.values, p.nulls);
    if (cancelled.size() != 1) return false;
    // A running job is only flagged: its dependents go when it stops.
    jobs_ended(cancelled);
    if (cancelled.text_at(0, "status") == "cancelled") {
        cancel_dependents({id}, "was cancelled");
        // The next job of an ordered group may run now.
        note_queue_ready(text_view(queue));
    }
    return true;
}

bool retry_job(Datum queue, int64 id) {
    lock_dependencies_of(queue, id);
    Params<2> p;
    p.set(0, queue);
    p.set(1, Int64GetDatum(id));
    Rows dead = dead_dependency.execute(p.values, p.nulls);
    if (!dead.empty()) {
        std::string parent = std::to_string(dead.int64_at(0, "id"));
        throw core::Error("55000",
                          "job " + std::to_string(id) + " depends on job " + parent + ", which is " +
                              dead.text_at(0, "status"),
                          "Retried alone, it would wait for a job that does not run again.",
                          "Retry job " + parent + ": the jobs its failure cancelled come back with it.");
    }
    // On a distributed pg_wf, its dependencies in other shard groups count
    // as unfinished, and are asked again (remote_dependencies.hpp).
    std::vector<int64> remote;
    if (routed_with_cross_group_dependencies()) remote = remote_dependencies_of(queue, id);
    Params<3> r;
    r.set(0, queue);
    r.set(1, Int64GetDatum(id));
    r.set(2, Int32GetDatum(static_cast<int32>(remote.size())));
    Rows retried = retry_statement.execute(r.values, r.nulls);
    if (retried.size() != 1) return false;
    if (retried.text_at(0, "status") == "pending") note_queue_ready(text_view(queue));
    if (!remote.empty()) {
        forget_remote_inputs(queue, id);
        note_subscription(queue, id, remote, call([] { return GetUserNameFromId(RunAsOwner::caller(), false); }));
    }
    restore_descendants(id);
    return true;
}

int32 cancel_workflow_steps(Datum workflow_id, bool mark) {
    Params<1> w;
    w.set(0, workflow_id);
    int32 count = 0;
    std::vector<int64> parents;
    // Two passes at least, then until one cancels nothing: a step that was
    // completing when the first pass began (its row locked, which that pass
    // waited for) may have added steps (wf_complete_with_steps) that the
    // first pass's snapshot could not see; the next pass's can. A step
    // added later finds its adder flagged, and adds nothing.
    for (int pass = 0;; pass++) {
        bool first = pass == 0;
        Params<2> steps;
        steps.set(0, int8_array(lock_workflow.execute(w.values, w.nulls).int64_column("id")));
        unready_workflow.execute(steps.values, steps.nulls);
        steps.set(1, int8_array(idle_steps.execute(steps.values, steps.nulls).int64_column("id")));
        Rows cancelled = cancel_steps.execute(steps.values, steps.nulls);
        if (first && mark) mark_workflow_cancelled.execute(w.values, w.nulls);
        if (cancelled.empty() && !first) break;
        jobs_ended(cancelled);
        for (uint64 r = 0; r < cancelled.size(); r++)
            if (cancelled.bool_at(r, "cancelled_parent")) parents.push_back(cancelled.int64_at(r, "id"));
        count += static_cast<int32>(cancelled.size());
    }
    // Their dependents in other shard groups (a distributed pg_wf) hear it.
    if (!parents.empty() && routed_with_cross_group_dependencies()) note_remote_dependents(parents);
    if (!parents.empty()) {
        Params<1> o;
        o.set(0, int8_array(parents));
        std::vector<int64> outside = parents_of_outsiders.execute(o.values, o.nulls).int64_column("parent_id");
        if (!outside.empty()) cancel_dependents(outside, "was cancelled");
    }
    return count;
}

}  // namespace wf::pg
