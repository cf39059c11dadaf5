// Retention: finished jobs older than wf.retention go, in small batches,
// with what they leave behind elsewhere. Run by the background worker.
#include "pg/worker/retention.hpp"

#include <set>

#include "pg/base/spi.hpp"
#include "pg/citus/cluster_calls.hpp"
#include "pg/citus/shard_route.hpp"
#include "pg/runtime/extension.hpp"

namespace wf::pg {
namespace {

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
    " SELECT (SELECT max(id) FROM batch) AS last_id, (SELECT count(*) FROM gone) AS deleted,"
    "        coalesce((SELECT bool_or(created_at >= $2) FROM batch), true) AS walked_all",
    {INT8OID, TIMESTAMPTZOID, INT4OID});

// Once per walk over the jobs: what retention leaves behind elsewhere.
// Release debts and checkpoints of jobs deleted; dedup keys and ordered
// groups nothing holds; workflows whose steps are all gone; signals
// older than retention that nobody waits for (a later await of such an
// event waits for a new signal); wait rows whose job no longer waits at
// that attempt (it was cancelled); workflow keys and child rows nothing
// needs any more.
// What one queue's jobs leave behind: release debts of children gone,
// checkpoints of jobs gone, dedup keys whose job finished (the next enqueue
// would take them over) or is gone, ordered groups whose jobs are all gone,
// event waits of jobs no longer waiting. On a distributed pg_wf, all that
// a shard group holds.
#define WF_EXPIRE_QUEUE_LEFTOVERS \
    "WITH debts AS (" \
    "  DELETE FROM wf.release_debt r WHERE NOT EXISTS (" \
    "     SELECT 1 FROM wf.job j WHERE j.queue = r.child_queue AND j.id = r.child_id))," \
    " checkpoints AS (" \
    "  DELETE FROM wf.checkpoint k WHERE k.recorded_at < $1" \
    "     AND NOT EXISTS (SELECT 1 FROM wf.job j WHERE j.queue = k.queue AND j.id = k.job_id))," \
    " dedups AS (" \
    "  DELETE FROM wf.dedup d WHERE NOT EXISTS (" \
    "     SELECT 1 FROM wf.job j WHERE j.queue = d.queue AND j.id = d.job_id" \
    "        AND j.status IN ('blocked', 'pending', 'waiting')))," \
    " groups AS (" \
    "  DELETE FROM wf.ordered_group g WHERE NOT EXISTS (" \
    "     SELECT 1 FROM wf.job j WHERE j.queue = g.queue AND j.key = g.key))," \
    " waits AS (" \
    "  DELETE FROM wf.event_wait w WHERE w.since < $1" \
    "     AND NOT EXISTS (SELECT 1 FROM wf.job j WHERE j.queue = w.queue AND j.id = w.id" \
    "                        AND j.attempt = w.attempt AND j.status = 'waiting'))"

PreparedStatement expire_leftovers(
    WF_EXPIRE_QUEUE_LEFTOVERS ","
    " workflows AS ("
    "  DELETE FROM wf.workflow w WHERE w.submitted_at < $1"
    "     AND NOT EXISTS (SELECT 1 FROM wf.job j WHERE j.workflow_id = w.id)),"
    " events AS ("
    "  DELETE FROM wf.event e WHERE coalesce(e.signalled_at, e.created_at) < $1"
    "     AND NOT EXISTS (SELECT 1 FROM wf.event_wait w WHERE w.event = e.name)),"
    // Workflow keys whose workflow is over or gone (the next start takes
    // them over); children whose parent job is gone and whose outcome was
    // delivered (or had nobody to go to).
    " workflow_keys AS ("
    "  DELETE FROM wf.workflow_key k WHERE NOT EXISTS ("
    "     SELECT 1 FROM wf.job j WHERE j.workflow_id = k.workflow_id"
    "        AND j.status IN ('blocked', 'pending', 'waiting'))),"
    " children AS ("
    "  DELETE FROM wf.child c WHERE c.started_at < $1 AND c.status IS NOT NULL"
    "     AND NOT EXISTS (SELECT 1 FROM wf.job j WHERE j.queue = c.parent_queue"
    "                        AND j.id = c.parent_id))"
    " SELECT 1",
    {TIMESTAMPTZOID});

// On a distributed pg_wf, for one local shard group: workflows, events and
// children are not served there.
PreparedStatement expire_group_leftovers(WF_EXPIRE_QUEUE_LEFTOVERS " SELECT 1", {TIMESTAMPTZOID});

// And, since 1.8, what dependencies between groups leave in one: inputs
// of jobs gone, dependents of parents gone (remote_dependencies.hpp).
PreparedStatement expire_remote_leftovers(
    "WITH inputs AS ("
    "  DELETE FROM wf.remote_input r WHERE NOT EXISTS ("
    "     SELECT 1 FROM wf.job j WHERE j.queue = r.child_queue AND j.id = r.child_id))"
    " DELETE FROM wf.remote_dependent r WHERE NOT EXISTS ("
    "     SELECT 1 FROM wf.job j WHERE j.queue = r.parent_queue AND j.id = r.parent_id)",
    {});

}  // namespace

int64 expire_finished_jobs(int64* cursor, int keep_seconds, int batch) {
    Params<3> p;
    p.set(0, Int64GetDatum(*cursor));
    p.set(1, TimestampTzGetDatum(GetCurrentTimestamp() - int64{keep_seconds} * USECS_PER_SEC));
    p.set(2, Int32GetDatum(batch));
    bool in_group = current_shard_group() != nullptr;
    Rows step = expire_jobs.execute(p.values, p.nulls);
    int64 deleted = step.int64_at(0, "deleted");
    // Past the last job, or among jobs created after the cutoff (which
    // cannot have finished before it): start again from the oldest.
    bool walked_all = step.bool_at(0, "walked_all");
    *cursor = walked_all ? 0 : step.int64_at(0, "last_id");
    if (walked_all) {
        Params<1> l;
        l.set(0, p.values[1]);
        (in_group ? expire_group_leftovers : expire_leftovers).execute(l.values, l.nulls);
        if (routed_with_cross_group_dependencies()) expire_remote_leftovers.execute();
    }
    return deleted;
}

int64 expire_cluster_events(int keep_seconds, int batch) {
    std::string cutoff = timestamptz_literal(
        TimestampTzGetDatum(GetCurrentTimestamp() - int64{keep_seconds} * USECS_PER_SEC));
    std::string old = "coalesce(signalled_at, created_at) < " + cutoff;
    Rows candidates = run_through_citus("SELECT name FROM wf.event WHERE " + old +
                                        " ORDER BY name LIMIT " + std::to_string(batch));
    if (candidates.empty()) return 0;
    auto array_of = [](const Rows& rows, const std::set<std::string>& without) {
        std::string names;
        for (uint64 r = 0; r < rows.size(); r++)
            if (!without.count(rows.text_at(r, "name")))
                names += (names.empty() ? "" : ", ") + sql_literal(rows.text_at(r, "name"));
        return "ARRAY[" + names + "]::pg_catalog.text[]";
    };
    Rows waited = run_through_citus("SELECT DISTINCT event AS name FROM wf.event_wait WHERE event = ANY (" +
                                    array_of(candidates, {}) + ")");
    std::set<std::string> waited_for;
    for (uint64 r = 0; r < waited.size(); r++) waited_for.insert(waited.text_at(r, "name"));
    if (waited_for.size() == candidates.size()) return 0;
    // A wait that comes in after this read waits for a new signal.
    Rows deleted = run_through_citus("DELETE FROM wf.event WHERE name = ANY (" +
                                     array_of(candidates, waited_for) + ") AND " + old +
                                     " RETURNING name");
    return static_cast<int64>(deleted.size());
}

}  // namespace wf::pg
