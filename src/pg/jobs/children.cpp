// Jobs that ended: result waiters, child workflows, cancels that reach
// children (see children.hpp for the protocol).
#include "pg/jobs/children.hpp"

#include <algorithm>
#include <map>

#include "pg/citus/cluster_calls.hpp"
#include "pg/citus/shard_route.hpp"
#include "pg/jobs/job_state.hpp"
#include "pg/runtime/extension.hpp"
#include "pg/runtime/metrics.hpp"
#include "pg/runtime/wakeup.hpp"

namespace wf::pg {
namespace {

// A child's row, locked: every step of the child that ends takes it, so
// that of two steps ending at once the second sees the first ended.
#define WF_LOCK_CHILD_SQL(SKIP)                                                              \
    "SELECT parent_queue, parent_id, status IS NOT NULL AS finished, delivered"             \
    "  FROM wf.child WHERE workflow_id = $1 FOR UPDATE" SKIP
PreparedStatement lock_child(WF_LOCK_CHILD_SQL(""), {UUIDOID});
PreparedStatement lock_child_skipping(WF_LOCK_CHILD_SQL(" SKIP LOCKED"), {UUIDOID});

// Final steps: those no job runs after (has_dependents is set on a step
// as soon as a job depends on it, wf_complete_with_steps included).
#define WF_SQL_WORKFLOW_OUTCOME(STEPS)                                                      \
    "SELECT count(*) AS steps,"                                                            \
    "       count(*) FILTER (WHERE status IN ('blocked', 'pending', 'waiting')) AS unfinished," \
    "       CASE WHEN count(*) FILTER (WHERE status IN ('blocked', 'pending', 'waiting')) > 0"  \
    "            THEN 'running'"                                                               \
    "            WHEN count(*) FILTER (WHERE status = 'failed') > 0 THEN 'failed'"             \
    "            WHEN count(*) FILTER (WHERE status = 'cancelled') > 0 THEN 'cancelled'"       \
    "            ELSE 'done' END AS status,"                                                   \
    "       coalesce(jsonb_object_agg(coalesce(step_name, id::text), coalesce(result, 'null'))" \
    "                  FILTER (WHERE status = 'done' AND NOT has_dependents), '{}')::text"      \
    "         AS results,"                                                                     \
    "       (array_agg(last_error ORDER BY id) FILTER (WHERE status = 'failed'))[1] AS error"   \
    "  FROM " STEPS
PreparedStatement workflow_outcome(WF_SQL_WORKFLOW_OUTCOME("wf.job WHERE workflow_id = $1"),
                                   {UUIDOID});

PreparedStatement record_outcome(
    "UPDATE wf.child SET status = $2, finished_at = now(),"
    "       outcome = jsonb_build_object('workflow_id', workflow_id, 'status', $2::text,"
    "                                    'results', $3::jsonb, 'error', $4::text)"
    " WHERE workflow_id = $1",
    {UUIDOID, TEXTOID, TEXTOID, TEXTOID});

// The parent's row, unless another transaction holds it (its cancel, its
// own completion): then the worker delivers later.
PreparedStatement lock_parent(
    "SELECT 1 AS locked FROM wf.job WHERE queue = $1 AND id = $2 FOR NO KEY UPDATE SKIP LOCKED",
    {TEXTOID, INT8OID});

PreparedStatement parent_exists(
    "SELECT 1 AS found FROM wf.job WHERE queue = $1 AND id = $2", {TEXTOID, INT8OID});

PreparedStatement deliver_outcome(
    "WITH delivered AS ("
    "  UPDATE wf.child c SET delivered = true"
    "   WHERE c.workflow_id = $3 AND NOT c.delivered AND c.status IS NOT NULL"
    "  RETURNING c.name, c.outcome)"
    " UPDATE wf.job j"
    "    SET events = coalesce(j.events, '{}') || jsonb_build_object('" "wf:child:" "' || d.name,"
    "                                                               d.outcome)"
    "   FROM delivered d WHERE j.queue = $1 AND j.id = $2",
    {TEXTOID, INT8OID, UUIDOID});

PreparedStatement mark_delivered(
    "UPDATE wf.child SET delivered = true WHERE workflow_id = $1", {UUIDOID});

PreparedStatement count_undelivered(
    "SELECT count(*) AS undelivered FROM wf.child"
    " WHERE parent_queue = $1 AND parent_id = $2 AND NOT delivered",
    {TEXTOID, INT8OID});

// A parent parked in wf_await_children goes back to pending, at once.
PreparedStatement wake_parent(
    "WITH woken_wait AS ("
    "  DELETE FROM wf.event_wait w"
    "   WHERE w.queue = $1 AND w.id = $2 AND w.event = '" "wf:children" "'"
    "  RETURNING w.attempt),"
    " woken AS ("
    "  UPDATE wf.job j SET status = 'pending', run_at = now()"
    "    FROM woken_wait w"
    "   WHERE j.queue = $1 AND j.id = $2 AND j.attempt = w.attempt AND j.status = 'waiting'"
    "  RETURNING j.queue, j.priority, j.run_at, j.id, j.key, j.version),"
    WF_SQL_ENTER_READY("woken", "")
    " SELECT count(*) AS woken FROM woken",
    {TEXTOID, INT8OID});

PreparedStatement children_to_cancel(
    "SELECT workflow_id FROM wf.child WHERE parent_id = ANY ($1) AND status IS NULL"
    " ORDER BY workflow_id",
    {INT8ARRAYOID});

PreparedStatement recorded_outcomes_of(
    "SELECT workflow_id FROM wf.child"
    " WHERE parent_queue = $1 AND parent_id = $2 AND status IS NOT NULL AND NOT delivered"
    " ORDER BY workflow_id",
    {TEXTOID, INT8OID});

// The unfinished steps of the children about to be cancelled, locked in
// one statement in (queue, id) order -- the order completions lock in -- so
// that cancelling one child after another cannot deadlock with a worker
// ending steps of two of them.
PreparedStatement lock_children_steps(
    "SELECT 1 FROM wf.job WHERE workflow_id = ANY ($1)"
    "   AND status IN ('blocked', 'pending', 'waiting')"
    " ORDER BY queue, id FOR NO KEY UPDATE",
    {UUIDARRAYOID});

// Whether a step of the workflow is unfinished, stopping at the first: the
// outcome's aggregate runs only for the step that ends last.
PreparedStatement step_unfinished(
    "SELECT EXISTS (SELECT 1 FROM wf.job WHERE workflow_id = $1"
    "                  AND status IN ('blocked', 'pending', 'waiting')) AS unfinished",
    {UUIDOID});

PreparedStatement undelivered_outcomes(
    "SELECT workflow_id FROM wf.child WHERE status IS NOT NULL AND NOT delivered"
    " ORDER BY workflow_id LIMIT 1000",
    {});

// ---- on a distributed pg_wf (1.9) ----
// wf.child is a reference table, which a call in one shard group reads
// but does not write, and a child's steps are in any groups: the end of a
// child's step, and the cancel of a parent with children, go to the
// node's worker through wf.outbox (the node's own table), which records
// the outcome once the child is over and delivers it to the parent's group
// (worker/relay.cpp, deliver_child_outcome).
PreparedStatement note_children_ended(
    "INSERT INTO wf.outbox (kind, parent_ids, workflow_id)"
    " SELECT 'child', '{}', w FROM unnest($1::uuid[]) AS w",
    {UUIDARRAYOID});

PreparedStatement note_children_to_cancel(
    "INSERT INTO wf.outbox (kind, parent_ids, workflow_id)"
    " SELECT 'cancel_child', ARRAY[parent_id], workflow_id FROM wf.child"
    "  WHERE parent_id = ANY ($1) AND status IS NULL"
    " RETURNING id",
    {INT8ARRAYOID});

PreparedStatement lock_parent_waiting(
    "SELECT 1 AS found FROM wf.job WHERE queue = $1 AND id = $2 FOR NO KEY UPDATE",
    {TEXTOID, INT8OID});

PreparedStatement add_child_outcome(
    "UPDATE wf.job SET events = coalesce(events, '{}') || jsonb_build_object('" "wf:child:" "' || $3, $4::jsonb)"
    " WHERE queue = $1 AND id = $2",
    {TEXTOID, INT8OID, TEXTOID, JSONBOID});

// Its other children not delivered yet (the worker marks this one in the
// same transaction).
PreparedStatement count_others_undelivered(
    "SELECT count(*) AS undelivered FROM wf.child"
    " WHERE parent_queue = $1 AND parent_id = $2 AND NOT delivered AND workflow_id <> $3",
    {TEXTOID, INT8OID, UUIDOID});

bool uuid_less(const pg_uuid_t& a, const pg_uuid_t& b) {
    return std::memcmp(a.data, b.data, UUID_LEN) < 0;
}

// A uuid[] of `ids` (its elements point into them while the array is built).
Datum uuid_array(const std::vector<pg_uuid_t>& ids) {
    std::vector<Datum> datums;
    for (const pg_uuid_t& id : ids) datums.push_back(UUIDPGetDatum(const_cast<pg_uuid_t*>(&id)));
    return datum_array(datums, std::vector<bool>(ids.size(), false), UUIDOID);
}

// The outcome of child workflow `id`, recorded earlier, goes into its
// parent's events. False when the parent is held by another transaction.
bool deliver(const std::string& queue, int64 parent_id, Datum id) {
    Params<3> p;
    p.set(0, text_datum(queue));
    p.set(1, Int64GetDatum(parent_id));
    p.set(2, id);
    if (lock_parent.execute(p.values, p.nulls).empty()) {
        if (!parent_exists.execute_latest(p.values, p.nulls).empty()) {
            // Held: the worker delivers once that transaction is over (woken
            // at this commit; the worker itself tries again at its next pass,
            // rather than waking itself in a loop while the holder runs on).
            if (!IsBackgroundWorker) note_releases_deferred();
            return false;
        }
        // The parent is gone (deleted by retention): nobody to deliver to.
        Params<1> w;
        w.set(0, id);
        mark_delivered.execute(w.values, w.nulls);
        return true;
    }
    deliver_outcome.execute(p.values, p.nulls);
    // Under the parent's lock: every other delivery to it has committed or
    // waits behind this one (a delivery that skipped the lock is not
    // delivered, and counts).
    if (count_undelivered.execute_latest(p.values, p.nulls).int64_at(0, "undelivered") == 0 &&
        wake_parent.execute(p.values, p.nulls).int64_at(0, "woken") > 0)
        note_queue_ready(queue);
    return true;
}

// Child workflow `id` (a step of it ended): recorded and delivered once
// its last step has ended.
void settle_child(const pg_uuid_t& uuid, bool skip_locked) {
    Params<4> p;
    p.set(0, UUIDPGetDatum(const_cast<pg_uuid_t*>(&uuid)));
    Rows child = (skip_locked ? lock_child_skipping : lock_child).execute(p.values, p.nulls);
    if (child.empty()) return;
    std::string queue_name = child.text_at(0, "parent_queue");
    int64 parent_id = child.int64_at(0, "parent_id");
    bool delivered = child.bool_at(0, "delivered");
    if (!child.bool_at(0, "finished")) {
        if (step_unfinished.execute_latest(p.values, p.nulls).bool_at(0, "unfinished")) return;
        WorkflowOutcome outcome = read_workflow_outcome(p.values[0]);
        if (!outcome.finished) return;
        p.set(1, text_datum(outcome.status));
        p.set(2, text_datum(*outcome.results_json));
        p.set_or_null(3, !outcome.error, outcome.error ? text_datum(*outcome.error) : 0);
        record_outcome.execute(p.values, p.nulls);
    }
    if (!delivered) deliver(queue_name, parent_id, p.values[0]);
}

}  // namespace

WorkflowOutcome read_workflow_outcome(Datum workflow_id) {
    Params<1> p;
    p.set(0, workflow_id);
    // On a distributed pg_wf, its steps from every group they are in,
    // summed up here.
    auto on_cluster = [&] {
        char* id = call([&] { return DatumGetCString(DirectFunctionCall1(uuid_out, workflow_id)); });
        return run_through_citus(
            "WITH s AS MATERIALIZED (SELECT step_name, id, status, has_dependents, result, last_error"
            "                          FROM wf.job WHERE workflow_id = " +
            sql_literal(id) + "::pg_catalog.uuid) " WF_SQL_WORKFLOW_OUTCOME("s"));
    };
    Rows rows = distributed() && current_shard_group() == nullptr
                    ? on_cluster()
                    : workflow_outcome.execute_latest(p.values, p.nulls);
    WorkflowOutcome outcome;
    outcome.exists = rows.int64_at(0, "steps") > 0;
    outcome.finished = outcome.exists && rows.int64_at(0, "unfinished") == 0;
    outcome.status = rows.text_at(0, "status");
    outcome.results_json = rows.text_at(0, "results");
    if (!rows.is_null(0, "error")) outcome.error = rows.text_at(0, "error");
    rows.free();  // a wait reads it again and again
    return outcome;
}

// A text datum of a row, as bytes (short texts: never toasted).
std::string_view text_of(Datum d) {
    text* t = reinterpret_cast<text*>(DatumGetPointer(d));
    return std::string_view(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
}

namespace {

// jobs_ended in a shard group of a distributed pg_wf: the node's worker
// takes the ends of child workflows' steps, and the cancels of parents, to
// their groups.
void note_child_workflows_across_groups(const std::vector<pg_uuid_t>& ended_children,
                                        const std::vector<int64>& cancelled) {
    if (ended_children.empty() && cancelled.empty()) return;
    if (!schema_at_least("1.9")) return;  // no child workflows before
    bool noted = false;
    if (!ended_children.empty()) {
        Params<1> p;
        p.set(0, uuid_array(ended_children));
        note_children_ended.execute(p.values, p.nulls);
        noted = true;
    }
    if (!cancelled.empty()) {
        Params<1> p;
        p.set(0, int8_array(cancelled));
        if (!note_children_to_cancel.execute(p.values, p.nulls).empty()) noted = true;
    }
    if (noted) note_releases_deferred();
}

}  // namespace

void jobs_ended(const Rows& rows) {
    if (rows.empty()) return;
    // Read by position, once per statement: a completion of 100 jobs runs
    // this for each of them.
    SPITupleTable* table = rows.table();
    const int queue_at = rows.position("queue"), id_at = rows.position("id"),
              status_at = rows.position("status"), workflow_at = rows.position("workflow_id"),
              child_of_at = rows.position("child_of");
    std::vector<EndedJob> jobs;
    jobs.reserve(rows.size());
    for (uint64 r = 0; r < rows.size(); r++) {
        HeapTuple tuple = table->vals[r];
        bool isnull;
        Datum status_datum = SPI_getbinval(tuple, table->tupdesc, status_at, &isnull);
        if (isnull) continue;
        std::string_view status = text_of(status_datum);
        EndedJob job{};
        if (status == "done") job.outcome = EndedJob::done;
        else if (status == "failed") job.outcome = EndedJob::failed;
        else if (status == "cancelled") job.outcome = EndedJob::cancelled;
        else continue;
        job.id = DatumGetInt64(SPI_getbinval(tuple, table->tupdesc, id_at, &isnull));
        job.queue = text_of(SPI_getbinval(tuple, table->tupdesc, queue_at, &isnull));
        Datum workflow = SPI_getbinval(tuple, table->tupdesc, workflow_at, &isnull);
        job.in_workflow = !isnull;
        if (job.in_workflow) {
            std::memcpy(&job.workflow_id, DatumGetUUIDP(workflow), sizeof job.workflow_id);
            SPI_getbinval(tuple, table->tupdesc, child_of_at, &isnull);
            job.has_child_of = !isnull;
        }
        jobs.push_back(job);
    }
    jobs_ended(jobs);
}

void jobs_ended(const std::vector<EndedJob>& jobs) {
    if (jobs.empty()) return;
    // Hashes for result waiters only when there is one (wakeup.hpp).
    const bool any_waiter = result_waiters_present();
    std::vector<int64> cancelled;
    std::vector<pg_uuid_t> child_workflows;
    std::string_view counted_queue;
    int64 counted[3] = {0, 0, 0};  // done, failed, cancelled of counted_queue
    auto flush_counts = [&] {
        const Metric metrics[3] = {Metric::completed, Metric::failed, Metric::cancelled};
        for (int m = 0; m < 3; m++)
            if (counted[m]) count(counted_queue, metrics[m], counted[m]), counted[m] = 0;
    };
    for (const EndedJob& job : jobs) {
        if (job.queue != counted_queue) {
            flush_counts();
            counted_queue = job.queue;
        }
        counted[job.outcome]++;
        if (any_waiter) note_result_ready(job_result_hash(job.id));
        else note_results_unhashed();
        if (job.in_workflow) {
            if (any_waiter) note_result_ready(workflow_result_hash(job.workflow_id));
            if (job.has_child_of) child_workflows.push_back(job.workflow_id);
        }
        if (job.outcome == EndedJob::cancelled) cancelled.push_back(job.id);
    }
    flush_counts();
    // Children's rows are locked in one order by every transaction.
    std::sort(child_workflows.begin(), child_workflows.end(), uuid_less);
    child_workflows.erase(std::unique(child_workflows.begin(), child_workflows.end(),
                                      [](const pg_uuid_t& a, const pg_uuid_t& b) {
                                          return !uuid_less(a, b) && !uuid_less(b, a);
                                      }),
                          child_workflows.end());
    if (routed_with_cross_group_dependencies()) {
        note_child_workflows_across_groups(child_workflows, cancelled);
        return;
    }
    for (const pg_uuid_t& id : child_workflows) settle_child(id, false);
    if (cancelled.empty()) return;
    // A cancelled job's unfinished children are cancelled, and theirs in turn
    // (cancel_workflow_steps ends steps, which comes back here).
    Params<1> p;
    p.set(0, int8_array(cancelled));
    std::vector<pg_uuid_t> ids = children_to_cancel.execute(p.values, p.nulls).uuid_column("workflow_id");
    if (ids.empty()) return;
    Params<1> l;
    l.set(0, uuid_array(ids));
    lock_children_steps.execute(l.values, l.nulls);
    for (pg_uuid_t& id : ids) cancel_workflow_steps(UUIDPGetDatum(&id));
}

int64 undelivered_children(Datum queue, int64 parent_id) {
    Params<2> p;
    p.set(0, queue);
    p.set(1, Int64GetDatum(parent_id));
    // On a distributed pg_wf the worker records and delivers an outcome in
    // one transaction: none is ever left recorded and undelivered.
    if (current_shard_group() != nullptr)
        return count_undelivered.execute_latest(p.values, p.nulls).int64_at(0, "undelivered");
    // Outcomes recorded while another transaction held the parent (this
    // caller holds it now): delivered here rather than at the worker's pass.
    std::vector<pg_uuid_t> ids =
        recorded_outcomes_of.execute_latest(p.values, p.nulls).uuid_column("workflow_id");
    for (const pg_uuid_t& id : ids) settle_child(id, true);
    return count_undelivered.execute_latest(p.values, p.nulls).int64_at(0, "undelivered");
}

int64 deliver_child_outcome(Datum parent_queue, int64 parent_id, Datum workflow_id, Datum name,
                            Datum outcome) {
    Params<4> p;
    p.set(0, parent_queue);
    p.set(1, Int64GetDatum(parent_id));
    if (lock_parent_waiting.execute(p.values, p.nulls).empty()) return 0;  // gone (retention)
    p.set(2, name);
    p.set(3, outcome);
    add_child_outcome.execute(p.values, p.nulls);
    p.set(2, workflow_id);
    Params<2> w;
    w.set(0, parent_queue);
    w.set(1, Int64GetDatum(parent_id));
    if (count_others_undelivered.execute_latest(p.values, p.nulls).int64_at(0, "undelivered") == 0 &&
        wake_parent.execute(w.values, w.nulls).int64_at(0, "woken") > 0)
        note_queue_ready(text_of(parent_queue));
    return 1;
}

int64 settle_undelivered_children() {
    std::vector<pg_uuid_t> ids = undelivered_outcomes.execute().uuid_column("workflow_id");
    for (const pg_uuid_t& id : ids) settle_child(id, true);
    return static_cast<int64>(ids.size());
}

}  // namespace wf::pg
