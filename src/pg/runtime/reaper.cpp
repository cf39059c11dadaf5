// The reaper: running jobs whose owner session is gone, or whose lease ran
// out, go back to pending (or to failed when their attempts are spent).
// Run by the background worker every wf.sweep_interval and when a claiming
// session exits, and by hand with wf_sweep().
#include "pg/base/args.hpp"
#include "pg/jobs/job_state.hpp"
#include "pg/runtime/ownership.hpp"
#include "pg/runtime/wakeup.hpp"

namespace wf::pg {
namespace {

PreparedStatement running_owners(
    "SELECT DISTINCT owner_session FROM wf.claim WHERE queue <> ''", {});

// SQL: job row J runs attempt A -- its row says pending one attempt behind
// (1.2), or running at A: a claim made by a 1.1 library, the server not
// restarted after the library was replaced.
#define WF_RUNS_ATTEMPT(J, A)                                                      \
    "((" J ".attempt + 1 = " A " AND " J ".status = 'pending') OR (" J ".attempt = " A \
    " AND " J ".status = 'running'))"

// The job row first, then its claim, as wf_complete does: no deadlock.
// A recovered job keeps its run_at, and so its place in line.
// The queue of every claim row names its job row, so this stays routable.
// The lost attempt counts: the job row takes its number (see
// pg_wf--1.1--1.2.sql for why a running job's row is one behind).
PreparedStatement recover_jobs(
    "WITH lost AS ("
    "  SELECT c.queue, c.id, c.attempt, c.owner_session = ANY($1) AS session_ended,"
    "         c.lease_expires_at, c.owner_pid, c.worker, c.started_at"
    "    FROM wf.claim c"
    "   WHERE c.queue <> '' AND (c.owner_session = ANY($1) OR c.lease_expires_at < $2)),"
    " recovered AS ("
    "  UPDATE wf.job j SET"
    "    attempt = lost.attempt, worker = lost.worker, started_at = lost.started_at,"
    "    status = CASE WHEN j.cancel_requested THEN 'cancelled'"
    "                  WHEN lost.attempt >= j.max_attempts THEN 'failed' ELSE 'pending' END,"
    "    last_error = CASE WHEN lost.session_ended"
    "                 THEN format('worker lost: session (pid %s) ended during attempt %s',"
    "                             lost.owner_pid, lost.attempt)"
    "                 ELSE format('worker lost: lease expired at %s during attempt %s',"
    "                             lost.lease_expires_at, lost.attempt) END,"
    "    finished_at = CASE WHEN j.cancel_requested OR lost.attempt >= j.max_attempts THEN $2 END"
    "   FROM lost"
    "  WHERE j.queue = lost.queue AND j.id = lost.id AND " WF_RUNS_ATTEMPT("j", "lost.attempt")
    "  RETURNING j.queue, j.priority, j.run_at, j.id, j.attempt, j.status),"
    // With the claims recovered go lost ones that hold no job at all (a job
    // deleted by hand): otherwise each pass would look at them again.
    " released AS (DELETE FROM wf.claim c USING lost"
    "               WHERE c.queue = lost.queue AND c.id = lost.id AND c.attempt = lost.attempt"
    "                 AND (EXISTS (SELECT 1 FROM recovered r"
    "                               WHERE r.queue = c.queue AND r.id = c.id AND r.attempt = c.attempt)"
    "                      OR NOT EXISTS (SELECT 1 FROM wf.job j"
    "                                      WHERE j.queue = c.queue AND j.id = c.id"
    "                                        AND " WF_RUNS_ATTEMPT("j", "c.attempt") "))),"
    " ready AS (INSERT INTO wf.ready (queue, priority, run_at, id)"
    "           SELECT queue, priority, run_at, id FROM recovered WHERE status = 'pending' ON CONFLICT DO NOTHING)"
    " SELECT queue, id, status FROM recovered",
    {INT8ARRAYOID, TIMESTAMPTZOID});

// wf.claim is unlogged: a crash (or a standby's promotion) empties it,
// sentinel row included. The sessions of the running jobs died with the
// server, and what is left of a claim is that its job is pending without a
// ready row (the claim's one durable write was removing it). Those jobs are
// recovered once, their lost attempt counted: a job that crashes the server
// each time it runs ends failed like any other, and the attempt number the
// lost worker holds is never handed out again. A pending job's ready row
// has the job's own priority and run_at.
PreparedStatement claims_survived(
    "SELECT 1 FROM wf.claim WHERE queue = '' AND id = 0", {});

// $2 says how the claims were lost. A row still marked running (written
// by a 1.1 library, its attempt already counted) was lost too.
PreparedStatement recover_orphans(
    "WITH orphan AS ("
    "  SELECT j.queue, j.id, j.attempt AS seen, j.status AS seen_status,"
    "         j.attempt + CASE WHEN j.status = 'running' THEN 0 ELSE 1 END AS attempt"
    "    FROM wf.job j"
    "   WHERE j.status = 'running'"
    "      OR (j.status = 'pending'"
    "          AND NOT EXISTS (SELECT 1 FROM wf.ready r"
    "               WHERE r.queue = j.queue AND r.priority = j.priority AND r.run_at = j.run_at"
    "                 AND r.id = j.id)"
    "          AND NOT EXISTS (SELECT 1 FROM wf.claim c"
    "               WHERE c.queue = j.queue AND c.id = j.id AND c.attempt = j.attempt + 1))),"
    " recovered AS ("
    "  UPDATE wf.job j SET attempt = o.attempt,"
    "    status = CASE WHEN j.cancel_requested THEN 'cancelled'"
    "                  WHEN o.attempt >= j.max_attempts THEN 'failed' ELSE 'pending' END,"
    "    last_error = format('worker lost: %s during attempt %s', $2, o.attempt),"
    "    finished_at = CASE WHEN j.cancel_requested OR o.attempt >= j.max_attempts THEN $1 END"
    "   FROM orphan o"
    "  WHERE j.queue = o.queue AND j.id = o.id AND j.attempt = o.seen AND j.status = o.seen_status"
    "  RETURNING j.queue, j.priority, j.run_at, j.id, j.status),"
    " ready AS (INSERT INTO wf.ready (queue, priority, run_at, id)"
    "           SELECT queue, priority, run_at, id FROM recovered WHERE status = 'pending' ON CONFLICT DO NOTHING),"
    " sentinel AS (INSERT INTO wf.claim VALUES ('', 0, 0, 0) ON CONFLICT DO NOTHING)"
    " SELECT queue, id, status FROM recovered",
    {TIMESTAMPTZOID, TEXTOID});

// Wakes claimers of recovered jobs; returns the jobs that ended for good.
void note_recovered(uint64 rows, std::vector<int64>* finished) {
    for (uint64 r = 0; r < rows; r++) {
        std::string status = column_text(r, 3);
        if (status == "pending") {
            std::string queue = column_text(r, 1);
            note_queue_ready(queue.data(), queue.size());
        } else {
            finished->push_back(column_int64(r, 2));
        }
    }
}

// A batch of the oldest jobs from the cursor on; the finished ones past
// retention go, with their dependency edges. Deleting by
// ctid skips a row a concurrent wf_retry changed meanwhile.
PreparedStatement expire_jobs(
    "WITH batch AS MATERIALIZED ("
    "  SELECT ctid AS tid, id, created_at,"
    "         status IN ('done', 'failed', 'cancelled') AND finished_at < $2 AS expired"
    "    FROM wf.job WHERE id > $1 ORDER BY id LIMIT $3),"
    " gone AS (DELETE FROM wf.job j WHERE j.ctid = ANY (ARRAY(SELECT tid FROM batch WHERE expired))"
    "          RETURNING j.id),"
    " edges AS (DELETE FROM wf.dependency d WHERE d.parent_id = ANY (ARRAY(SELECT id FROM gone)))"
    " SELECT (SELECT max(id) FROM batch), (SELECT count(*) FROM gone),"
    "        coalesce((SELECT bool_or(created_at >= $2) FROM batch), true)",
    {INT8OID, TIMESTAMPTZOID, INT4OID});

// Once per walk over the jobs: what retention leaves behind elsewhere.
// Release debts and checkpoints of jobs deleted; workflows whose steps are all gone; signals
// older than retention that nobody waits for (a later await of such an
// event waits for a new signal); wait rows whose job no longer waits at
// that attempt (it was cancelled).
PreparedStatement expire_leftovers(
    "WITH debts AS ("
    "  DELETE FROM wf.release_debt r WHERE NOT EXISTS ("
    "     SELECT 1 FROM wf.job j WHERE j.queue = r.child_queue AND j.id = r.child_id)),"
    " checkpoints AS ("
    "  DELETE FROM wf.checkpoint k WHERE k.recorded_at < $1"
    "     AND NOT EXISTS (SELECT 1 FROM wf.job j WHERE j.queue = k.queue AND j.id = k.job_id)),"
    " workflows AS ("
    "  DELETE FROM wf.workflow w WHERE w.submitted_at < $1"
    "     AND NOT EXISTS (SELECT 1 FROM wf.job j WHERE j.workflow_id = w.id)),"
    " events AS ("
    "  DELETE FROM wf.event e WHERE coalesce(e.signalled_at, e.created_at) < $1"
    "     AND NOT EXISTS (SELECT 1 FROM wf.event_wait w WHERE w.event = e.name)),"
    " waits AS ("
    "  DELETE FROM wf.event_wait w WHERE w.since < $1"
    "     AND NOT EXISTS (SELECT 1 FROM wf.job j WHERE j.queue = w.queue AND j.id = w.id"
    "                        AND j.attempt = w.attempt AND j.status = 'waiting'))"
    " SELECT 1",
    {TIMESTAMPTZOID});

}  // namespace

int64 expire_finished_jobs(int64* cursor, int keep_seconds, int batch) {
    Params<3> p;
    p.set(0, Int64GetDatum(*cursor));
    p.set(1, TimestampTzGetDatum(GetCurrentTimestamp() - int64{keep_seconds} * USECS_PER_SEC));
    p.set(2, Int32GetDatum(batch));
    expire_jobs.execute(p.values, p.nulls);
    int64 deleted = column_int64(0, 2);
    // Past the last job, or among jobs created after the cutoff (which
    // cannot have finished before it): start again from the oldest.
    bool walked_all = column_bool(0, 3);
    *cursor = walked_all ? 0 : column_int64(0, 1);
    if (walked_all) {
        Params<1> l;
        l.set(0, p.values[1]);
        expire_leftovers.execute(l.values, l.nulls);
    }
    return deleted;
}

bool schema_is_current() {
    return call([] {
        Oid schema = get_namespace_oid("wf", true);
        Oid claim = OidIsValid(schema) ? get_relname_relid("claim", schema) : InvalidOid;
        return OidIsValid(claim) && get_attnum(claim, "started_at") != InvalidAttrNumber;
    });
}

namespace {
uint64 recover_lost_claims(const char* how, std::vector<int64>* finished) {
    Params<2> o;
    o.set(0, clock_now());
    o.set(1, text_datum(how));
    uint64 recovered = recover_orphans.execute(o.values, o.nulls);
    note_recovered(recovered, finished);
    return recovered;
}
}  // namespace

int64 sweep_database() {
    std::vector<int64> finished;
    uint64 recovered = 0;
    if (claims_survived.execute(nullptr, nullptr) == 0)
        recovered += recover_lost_claims("the server restarted", &finished);

    uint64 owners = running_owners.execute(nullptr, nullptr);
    std::vector<int64> dead;
    for (uint64 r = 0; r < owners; r++) {
        int64 key = column_int64(r, 1);
        bool alive = call([&] { return owner_is_alive(key); });
        if (!alive) dead.push_back(key);
    }
    Params<2> p;
    p.set(0, int8_array(dead));
    p.set(1, clock_now());
    uint64 lost = recover_jobs.execute(p.values, p.nulls);
    note_recovered(lost, &finished);
    recovered += lost;

    if (!finished.empty()) cancel_dependents(finished, "failed: its worker was lost");
    return static_cast<int64>(recovered);
}

}  // namespace wf::pg

using namespace wf::pg;

// wf_sweep() -> int: one reaper pass by hand (recovery, event timeouts,
// due schedules); returns the jobs recovered.
WF_SQL_FUNCTION(wf_sweep) {
    SpiConnection spi;
    int64 recovered = sweep_database();
    // The background worker's other duties, for a server without it.
    settle_release_debts();
    wake_timed_out_waits();
    fire_due_schedules();
    spi.finish();
    PG_RETURN_INT32(static_cast<int32>(recovered));
}

// wf_recover_lost_claims() -> int: jobs whose claim was lost without a
// crash -- a dump restored while they ran (claims are not dumped) -- are
// given back, their attempt counted. One scan of wf.job; run it once after
// the restore has finished (not during it: before wf.ready is loaded every
// pending job would look lost).
WF_SQL_FUNCTION(wf_recover_lost_claims) {
    SpiConnection spi;
    std::vector<int64> finished;
    uint64 recovered = recover_lost_claims("a dump was taken", &finished);
    if (!finished.empty()) cancel_dependents(finished, "failed: its worker was lost");
    spi.finish();
    PG_RETURN_INT32(static_cast<int32>(recovered));
}
