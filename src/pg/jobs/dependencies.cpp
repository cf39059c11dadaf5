// The dependency engine (see dependencies.hpp). Children are always locked
// in (queue, id) order before they are updated: two completions of parents
// that share children then queue up on the first shared child instead of
// deadlocking.
#include "pg/jobs/dependencies.hpp"

#include "pg/jobs/release_rows.hpp"

#include "pg/jobs/children.hpp"
#include "pg/jobs/remote_dependencies.hpp"
#include "pg/citus/shard_route.hpp"

#include "core/error.hpp"
#include "pg/jobs/job_state.hpp"
#include "pg/runtime/wakeup.hpp"
#include "pg/runtime/run_as.hpp"
#include "pg/runtime/worker_registry.hpp"

namespace wf::pg {
namespace {

// Locks the dependencies (in id order: two enqueuers never deadlock), so a
// dependency cannot finish between this read and the commit of the edges:
// its wf_complete waits, then re-reads the row.
PreparedStatement lock_parents(
    "SELECT id, status, queue FROM wf.job WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE",
    {INT8ARRAYOID});

// wf_complete looks for dependents only when this flag says there are some.
// It reads the flag from the row version its UPDATE wrote, so a completion
// that waited on the lock above sees the flag set here.
PreparedStatement flag_parents(
    "UPDATE wf.job SET has_dependents = true"
    " WHERE id = ANY($1) AND NOT has_dependents AND status <> 'done'",
    {INT8ARRAYOID});

PreparedStatement insert_edges(
    "INSERT INTO wf.dependency (parent_id, child_queue, child_id)"
    " SELECT unnest($1::bigint[]), $2, $3 ON CONFLICT DO NOTHING",
    {INT8ARRAYOID, TEXTOID, INT8OID});

#define WF_LOCK_CHILDREN_SQL(WAIT) \
    "SELECT c.id FROM wf.job c" \
    " WHERE c.id = ANY (ARRAY(SELECT d.child_id FROM wf.dependency d" \
    "                         WHERE d.parent_id = ANY ($1)))" \
    "   AND c.status = 'blocked'" \
    " ORDER BY c.queue, c.id FOR NO KEY UPDATE" WAIT

PreparedStatement lock_children(WF_LOCK_CHILDREN_SQL(""), {INT8ARRAYOID});

// Of them, those in $2 only.
PreparedStatement lock_given_children(
    "SELECT c.id FROM wf.job c"
    " WHERE c.id = ANY (ARRAY(SELECT d.child_id FROM wf.dependency d"
    "                         WHERE d.parent_id = ANY ($1) AND d.child_id = ANY ($2)))"
    "   AND c.status = 'blocked'"
    " ORDER BY c.queue, c.id FOR NO KEY UPDATE",
    {INT8ARRAYOID, INT8ARRAYOID});

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
    " RETURNING c.queue, c.priority, c.run_at, c.id, c.key, c.version, c.status)," \
    WF_SQL_ENTER_READY("released", WF_SQL_IF_PENDING) \
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

// Debts left on children that still exist (a debt whose child is gone is
// left for retention to remove). Asked only when there is a debt at all
// (any_debt): the worker asks after every release, and a plan of the join
// made while wf.job looked empty (led by wf.job, probing the debts once per
// job row) read all of wf.job each time, holding back the horizon that
// lets claims skip dead ready rows. (A LATERAL probe with LIMIT would fix
// the join's order, but Citus cannot push it down.)
PreparedStatement any_debt("SELECT EXISTS (SELECT 1 FROM wf.release_debt) AS any_debt", {});
PreparedStatement find_debts_left(
    "SELECT EXISTS (SELECT 1 FROM wf.release_debt r"
    "                 JOIN wf.job j ON j.queue = r.child_queue AND j.id = r.child_id) AS debts_left",
    {});

PreparedStatement cancel_descendants(
    "WITH RECURSIVE below(queue, id) AS ("
    "    SELECT d.child_queue, d.child_id FROM wf.dependency d WHERE d.parent_id = ANY($1)"
    "  UNION"
    "    SELECT d.child_queue, d.child_id FROM below JOIN wf.dependency d ON d.parent_id = below.id)"
    " UPDATE wf.job j SET status = 'cancelled', finished_at = now(), cancelled_by = $3,"
    // The reason names the root: a workflow step by its name.
    "        last_error = coalesce((SELECT CASE WHEN r.step_name IS NOT NULL"
    "                                  THEN format('step \"%s\" (job %s) %s', r.step_name, r.id, $2)"
    "                                  ELSE format('dependency job %s %s', r.id, $2) END"
    "                        FROM wf.job r WHERE r.id = $3),"
    // A root in another shard group (a distributed pg_wf) is not here.
    "                       format('dependency job %s %s', $3, $2))"
    "   FROM below WHERE j.queue = below.queue AND j.id = below.id AND j.status = 'blocked'"
    " RETURNING j.queue, j.id, j.status, j.workflow_id, j.child_of",
    {INT8ARRAYOID, TEXTOID, INT8OID});

// Before a retry counts its unfinished dependencies: locked, so that one
// completing meanwhile either is seen done or waits and then releases it.
PreparedStatement lock_retry_dependencies(
    "SELECT p.id FROM wf.job p"
    " WHERE p.id = ANY ((SELECT depends_on FROM wf.job WHERE queue = $1 AND id = $2)::bigint[])"
    " ORDER BY p.id FOR NO KEY UPDATE",
    {TEXTOID, INT8OID});

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
PreparedStatement restore_cancelled(
    WF_CANCELLED_BY_SQL ","
    " restored AS ("
    " UPDATE wf.job j"
    "    SET status = 'blocked', finished_at = NULL, cancelled_by = NULL, last_error = NULL,"
    "        pending_deps = (SELECT count(*) FROM wf.job p"
    "                         WHERE p.id = ANY(j.depends_on) AND p.status <> 'done')"
    // $2, a group serving dependencies between groups: those not here count
    // as unfinished, and are asked again (restore_descendants).
    "                     + CASE WHEN $2 THEN (SELECT count(*) FROM unnest(j.depends_on) AS x"
    "                         WHERE NOT EXISTS (SELECT 1 FROM wf.job p WHERE p.id = x)) ELSE 0 END"
    "   FROM back WHERE j.queue = back.queue AND j.id = back.id"
    " RETURNING j.queue, j.id)"
    WF_SQL_FORGIVE_DEBTS("restored")
    " SELECT queue, id FROM restored",
    {INT8OID, BOOLOID});

// The failed or cancelled parents of jobs $1 (each once).
PreparedStatement dead_parents_of(
    "SELECT DISTINCT p.id, p.status FROM wf.job j JOIN wf.job p ON p.id = ANY (j.depends_on)"
    " WHERE j.id = ANY ($1) AND p.status IN ('failed', 'cancelled')",
    {INT8ARRAYOID});

// Wakes the claimers of the children a release made pending.
void note_released(const Rows& released) {
    for (uint64 r = 0; r < released.size(); r++)
        if (released.text_at(r, "status") == "pending") note_queue_ready(released.text_at(r, "queue"));
}

}  // namespace

DependencyState lock_dependencies(const std::vector<int64>& ids) {
    DependencyState state;
    Params<1> p;
    p.set(0, int8_array(ids));
    Rows parents = lock_parents.execute(p.values, p.nulls);
    std::vector<int64> found;
    for (uint64 r = 0; r < parents.size(); r++) {
        int64 id = parents.int64_at(r, "id");
        std::string status = parents.text_at(r, "status");
        found.push_back(id);
        std::string queue = parents.text_at(r, "queue");
        if (std::find(state.queues.begin(), state.queues.end(), queue) == state.queues.end())
            state.queues.push_back(std::move(queue));
        if (status == "done") continue;
        state.not_done.push_back(id);
        if (status == "failed" || status == "cancelled") {
            if (state.failed == 0) {
                state.failed = id;
                state.failed_was_cancelled = status == "cancelled";
            }
        } else {
            state.unfinished.push_back(id);
        }
    }
    bool in_group = routed_with_cross_group_dependencies();
    for (int64 id : ids)
        if (!std::binary_search(found.begin(), found.end(), id)) {
            if (in_group) {
                state.remote.push_back(id);
                continue;
            }
            throw core::Error(core::sqlstate::foreign_key_violation,
                              "dependency job " + std::to_string(id) + " does not exist",
                              "depends_on names job ids returned by wf_enqueue.");
        }
    if (!state.not_done.empty()) {
        p.set(0, int8_array(state.not_done));
        flag_parents.execute(p.values, p.nulls);
    }
    return state;
}

void add_dependency_edges(const std::vector<int64>& parents, Datum child_queue, int64 child_id) {
    if (parents.empty()) return;
    Params<3> e;
    e.set(0, int8_array(parents));
    e.set(1, child_queue);
    e.set(2, Int64GetDatum(child_id));
    insert_edges.execute(e.values, e.nulls);
}

uint64 cancel_dependents(const std::vector<int64>& job_ids, const char* what_happened) {
    uint64 cancelled = 0;
    // One pass per root keeps cancelled_by and the reason naming the job
    // that failed.
    for (int64 id : job_ids) {
        Params<3> p;
        p.set(0, int8_array({id}));
        p.set(1, text_datum(what_happened));
        p.set(2, Int64GetDatum(id));
        // Until a pass cancels nothing. The root's own row was written
        // before (so an enqueue below it has committed or will see it
        // ended), but a job further down may be locked by an enqueue adding
        // a child to it: the pass waits for that enqueue, cancels the job,
        // and cannot see the new edge (its snapshot is older). The next
        // pass, with a snapshot taken after that wait, does; an enqueue
        // coming later waits for this transaction and sees its parent
        // cancelled.
        for (;;) {
            Rows rows = cancel_descendants.execute(p.values, p.nulls);
            if (rows.empty()) break;
            cancelled += rows.size();
            jobs_ended(rows);
            if (routed_with_cross_group_dependencies()) note_remote_dependents(rows.int64_column("id"));
        }
    }
    // Their dependents in other shard groups (a distributed pg_wf).
    if (routed_with_cross_group_dependencies()) note_remote_dependents(job_ids);
    return cancelled;
}

void release_dependents(const std::vector<int64>& job_ids) {
    if (job_ids.empty()) return;
    // Their dependents in other shard groups (a distributed pg_wf).
    if (routed_with_cross_group_dependencies()) note_remote_dependents(job_ids);
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
    if (current_shard_group() == nullptr) {
        // Without the executor (release_rows.hpp); the debts, a rare path
        // (a sibling parent completing at the same moment), by SQL.
        Released released = release_children_by_hand(job_ids);
        for (const std::string& queue : released.ready_queues) note_queue_ready(queue);
        if (!released.skipped) return;
        p.set(1, int8_array(released.locked));
        if (!defer_releases.execute(p.values, p.nulls).empty()) note_releases_deferred();
        return;
    }
    std::vector<int64> held = lock_children_skipping.execute(p.values, p.nulls).int64_column("id");
    p.set(1, int8_array(held));
    if (!held.empty()) note_released(release_children.execute(p.values, p.nulls));
    if (!defer_releases.execute(p.values, p.nulls).empty()) note_releases_deferred();
}

void release_children_of(int64 parent, const std::vector<int64>& children) {
    if (children.empty()) return;
    Params<2> p;
    p.set(0, int8_array({parent}));
    p.set(1, int8_array(children));
    lock_given_children.execute(p.values, p.nulls);
    note_released(release_children.execute(p.values, p.nulls));
}

int64 settle_release_debts(bool* debts_left) {
    std::vector<int64> children = lock_indebted_children.execute().int64_column("id");
    int64 released = 0;
    if (!children.empty()) {
        Params<1> p;
        p.set(0, int8_array(children));
        Rows rows = settle_debts.execute(p.values, p.nulls);
        note_released(rows);
        released = static_cast<int64>(rows.size());
    }
    if (debts_left)
        *debts_left = any_debt.execute().bool_at(0, "any_debt") &&
                      find_debts_left.execute().bool_at(0, "debts_left");
    return released;
}

void lock_dependencies_of(Datum queue, int64 id) {
    Params<2> p;
    p.set(0, queue);
    p.set(1, Int64GetDatum(id));
    lock_retry_dependencies.execute(p.values, p.nulls);
}

void restore_descendants(int64 id) {
    Params<2> r;
    r.set(0, Int64GetDatum(id));
    bool cross_group = routed_with_cross_group_dependencies();
    r.set(1, BoolGetDatum(cross_group));
    lock_restored_parents.execute(r.values, r.nulls);
    Rows back = restore_cancelled.execute(r.values, r.nulls);
    std::vector<int64> restored = back.int64_column("id");
    if (restored.empty()) return;
    // Their dependencies in other groups (a distributed pg_wf) are asked
    // again, as wf_retry asks a retried job's.
    if (cross_group) {
        std::vector<std::pair<std::string, int64>> jobs;
        for (uint64 row = 0; row < back.size(); row++)
            jobs.emplace_back(back.text_at(row, "queue"), back.int64_at(row, "id"));
        const char* role = call([] { return GetUserNameFromId(RunAsOwner::caller(), false); });
        for (const auto& [queue, job] : jobs) {
            Datum q = text_datum(queue);
            std::vector<int64> remote = remote_dependencies_of(q, job);
            if (remote.empty()) continue;
            forget_remote_inputs(q, job);
            note_subscription(q, job, remote, role);
        }
    }
    // A job restored here may also wait on another parent that failed or
    // was cancelled: it is cancelled again, by that parent, whose own retry
    // brings it back (as it brings back the jobs below it).
    Params<1> p;
    p.set(0, int8_array(restored));
    Rows dead = dead_parents_of.execute(p.values, p.nulls);
    std::vector<int64> failed, cancelled;
    for (uint64 row = 0; row < dead.size(); row++)
        (dead.text_at(row, "status") == "failed" ? failed : cancelled)
            .push_back(dead.int64_at(row, "id"));
    if (!failed.empty()) cancel_dependents(failed, "failed");
    if (!cancelled.empty()) cancel_dependents(cancelled, "was cancelled");
}

}  // namespace wf::pg
