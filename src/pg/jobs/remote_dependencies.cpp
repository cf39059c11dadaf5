// Dependencies between shard groups (see remote_dependencies.hpp).
#include "pg/jobs/remote_dependencies.hpp"

#include "pg/jobs/children.hpp"
#include "pg/jobs/dependencies.hpp"
#include "pg/runtime/wakeup.hpp"

namespace wf::pg {
namespace {

// wf.outbox is the node's own table: no route renames it.
PreparedStatement insert_subscription(
    "INSERT INTO wf.outbox (kind, parent_ids, child_queue, child_id, role_name)"
    " VALUES ('subscribe', $1, $2, $3, $4)",
    {INT8ARRAYOID, TEXTOID, INT8OID, TEXTOID});

PreparedStatement insert_endings(
    "INSERT INTO wf.outbox (kind, parent_queue, parent_ids)"
    " SELECT DISTINCT 'ended', r.parent_queue, ARRAY[r.parent_id] FROM wf.remote_dependent r"
    "  WHERE r.parent_id = ANY ($1)"  // the leading column of its key
    " RETURNING id",
    {INT8ARRAYOID});

// The parent locked: its end and this subscription are ordered (an end
// after it sees the child in wf.remote_dependent).
PreparedStatement lock_parent(
    "SELECT status FROM wf.job WHERE queue = $1 AND id = $2 FOR NO KEY UPDATE", {TEXTOID, INT8OID});

PreparedStatement record_remote_dependent(
    "WITH flagged AS (UPDATE wf.job SET has_dependents = true"
    "                  WHERE queue = $1 AND id = $2 AND NOT has_dependents)"
    " INSERT INTO wf.remote_dependent (parent_queue, parent_id, child_queue, child_id)"
    " VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
    {TEXTOID, INT8OID, TEXTOID, INT8OID});

// A parent's result, once per child and parent: a child whose input is
// there already was released of this parent (a delivery that comes twice
// -- its old subscription and a new one after a retry -- releases once).
// wf_retry of the child forgets its inputs, and asks again.
PreparedStatement record_remote_input(
    "INSERT INTO wf.remote_input (child_queue, child_id, parent_id, name, result)"
    " SELECT d.child_queue, d.child_id, $1, $2, $3 FROM wf.dependency d"
    "  WHERE d.parent_id = $1 AND d.child_id = ANY ($4)"
    " ON CONFLICT (child_queue, child_id, parent_id) DO NOTHING"
    " RETURNING child_id",
    {INT8OID, TEXTOID, JSONBOID, INT8ARRAYOID});

PreparedStatement forget_inputs(
    "DELETE FROM wf.remote_input WHERE child_queue = $1 AND child_id = $2", {TEXTOID, INT8OID});

// The parent's end and its dependents elsewhere, taken under its lock: a
// retry of the parent (which takes the lock) comes before, and then it has
// not ended, or after, and then they were told.
PreparedStatement lock_ended_parent(
    "SELECT status, result, coalesce(step_name, id::text) AS name FROM wf.job"
    " WHERE queue = $1 AND id = $2 FOR NO KEY UPDATE",
    {TEXTOID, INT8OID});
PreparedStatement take_remote_dependents(
    "WITH taken AS (DELETE FROM wf.remote_dependent WHERE parent_id = $2 AND parent_queue = $1"
    "               RETURNING child_queue, child_id)"
    " SELECT jsonb_build_object('status', $3::text, 'result', $4::jsonb, 'name', $5::text,"
    "        'children', coalesce(jsonb_agg(jsonb_build_object('queue', child_queue, 'id', child_id)),"
    "                             '[]')) AS taken FROM taken",
    {TEXTOID, INT8OID, TEXTOID, JSONBOID, TEXTOID});

// A parent that does not exist, or in a queue whose jobs the child's
// enqueuer may not read ($3 says which): the children are cancelled.
PreparedStatement cancel_orphans(
    "UPDATE wf.job j SET status = 'cancelled', finished_at = now(), cancelled_by = $1,"
    "       last_error = $3"
    "  FROM wf.dependency d"
    " WHERE d.parent_id = $1 AND d.child_id = ANY ($2)"
    "   AND j.queue = d.child_queue AND j.id = d.child_id AND j.status = 'blocked'"
    " RETURNING j.queue, j.id, j.status, j.workflow_id, j.child_of",
    {INT8OID, INT8ARRAYOID, TEXTOID});

PreparedStatement dependencies_elsewhere(
    "SELECT coalesce(ARRAY(SELECT x FROM unnest(j.depends_on) AS x"
    "                      WHERE NOT EXISTS (SELECT 1 FROM wf.job p WHERE p.id = x)"
    "                      ORDER BY x), '{}') AS remote"
    "  FROM wf.job j WHERE j.queue = $1 AND j.id = $2",
    {TEXTOID, INT8OID});

}  // namespace

void note_subscription(Datum child_queue, int64 child_id, const std::vector<int64>& parents,
                       const std::string& role) {
    if (parents.empty()) return;
    Params<4> p;
    p.set(0, int8_array(parents));
    p.set(1, child_queue);
    p.set(2, Int64GetDatum(child_id));
    p.set(3, text_datum(role));
    insert_subscription.execute(p.values, p.nulls);
    note_releases_deferred();
}

void note_remote_dependents(const std::vector<int64>& ended) {
    if (ended.empty()) return;
    Params<1> p;
    p.set(0, int8_array(ended));
    if (!insert_endings.execute(p.values, p.nulls).empty()) note_releases_deferred();
}

std::string subscribe_to_parent(Datum parent_queue, int64 parent_id, Datum child_queue,
                                int64 child_id) {
    Params<4> p;
    p.set(0, parent_queue);
    p.set(1, Int64GetDatum(parent_id));
    Rows parent = lock_parent.execute(p.values, p.nulls);
    if (parent.empty()) return "missing";
    std::string status = parent.text_at(0, "status");
    if (status == "done" || status == "failed" || status == "cancelled") return status;
    p.set(2, child_queue);
    p.set(3, Int64GetDatum(child_id));
    record_remote_dependent.execute(p.values, p.nulls);
    return "waiting";
}

int64 deliver_parent_end(int64 parent, const std::string& status, std::optional<Datum> result,
                         Datum name, const std::vector<int64>& children) {
    if (children.empty()) return 0;
    if (status == "done") {
        Params<4> p;
        p.set(0, Int64GetDatum(parent));
        p.set(1, name);
        p.set_or_null(2, !result, result.value_or(0));
        p.set(3, int8_array(children));
        std::vector<int64> fresh = record_remote_input.execute(p.values, p.nulls).int64_column("child_id");
        release_children_of(parent, fresh);
        return static_cast<int64>(fresh.size());
    }
    if (status == "missing" || status == "forbidden") {
        std::string reason = "dependency job " + std::to_string(parent) + " does not exist";
        if (status == "forbidden") {
            char* queue = call([&] { return TextDatumGetCString(name); });
            reason = "dependency job " + std::to_string(parent) + " is in queue \"" + queue +
                     "\", where the role that enqueued this job may not produce";
        }
        Params<3> p;
        p.set(0, Int64GetDatum(parent));
        p.set(1, int8_array(children));
        p.set(2, text_datum(reason));
        Rows cancelled = cancel_orphans.execute(p.values, p.nulls);
        jobs_ended(cancelled);
        std::vector<int64> ids = cancelled.int64_column("id");
        // What waits on them goes too, here and in other groups.
        int64 below = static_cast<int64>(cancel_dependents(ids, "was cancelled"));
        return static_cast<int64>(ids.size()) + below;
    }
    return static_cast<int64>(cancel_dependents({parent}, status == "failed" ? "failed" : "was cancelled"));
}

std::optional<Datum> take_dependents(Datum parent_queue, int64 parent_id) {
    Params<5> p;
    p.set(0, parent_queue);
    p.set(1, Int64GetDatum(parent_id));
    Rows parent = lock_ended_parent.execute(p.values, p.nulls);
    std::string status = parent.empty() ? "missing" : parent.text_at(0, "status");
    if (status != "done" && status != "failed" && status != "cancelled" && status != "missing")
        return std::nullopt;  // retried since: its next end is told then
    p.set(2, text_datum(status));
    p.set_or_null(3, parent.empty() || parent.is_null(0, "result"), parent.empty() ? 0 : parent.datum(0, "result"));
    p.set(4, parent.empty() ? text_datum(std::to_string(parent_id)) : parent.datum(0, "name"));
    Datum taken = take_remote_dependents.execute(p.values, p.nulls).datum(0, "taken");
    return call([&] { return SPI_datumTransfer(taken, false, -1); });
}

void forget_remote_inputs(Datum queue, int64 id) {
    Params<2> p;
    p.set(0, queue);
    p.set(1, Int64GetDatum(id));
    forget_inputs.execute(p.values, p.nulls);
}

std::vector<int64> remote_dependencies_of(Datum queue, int64 id) {
    Params<2> p;
    p.set(0, queue);
    p.set(1, Int64GetDatum(id));
    Rows rows = dependencies_elsewhere.execute(p.values, p.nulls);
    if (rows.empty()) return {};
    Datum array = rows.datum(0, "remote");
    ArrayType* a = call([&] { return DatumGetArrayTypeP(array); });
    int n = call([&] { return ArrayGetNItems(ARR_NDIM(a), ARR_DIMS(a)); });
    const int64* values = reinterpret_cast<const int64*>(ARR_DATA_PTR(a));
    return std::vector<int64>(values, values + n);
}

}  // namespace wf::pg
