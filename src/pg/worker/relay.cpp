// The relay of dependencies between shard groups (see
// jobs/remote_dependencies.hpp for the protocol).
#include "pg/worker/relay.hpp"

#include <algorithm>
#include <map>

#include "pg/api/rights.hpp"
#include "pg/api/workflow.hpp"
#include "pg/base/spi.hpp"
#include "pg/citus/cluster_calls.hpp"
#include "pg/jobs/children.hpp"

extern "C" {
#include "utils/acl.h"
}

namespace wf::pg {
namespace {

// (workflow_id came with 1.9.) $1: the entries deferred for now.
PreparedStatement next_entry(
    "SELECT id, kind, parent_queue, parent_ids, child_queue, child_id, role_name,"
    "       to_jsonb(o) ->> 'workflow_id' AS workflow_id FROM wf.outbox o"
    " WHERE id <> ALL ($1) ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED",
    {INT8ARRAYOID});

// Entries whose relay failed, and when to try each again (see
// defer_failed_entry), with the delay of its next failure.
struct Deferred {
    TimestampTz retry_at;
    long delay_ms;
    int failures;
    bool misrouted;  // its last failure was a call run on the wrong node
};
std::map<int64, Deferred> deferred;
constexpr long kFirstRetryMs = 1000, kLastRetryMs = 60000;
// A call Citus ran on the wrong node: tried again at least every second,
// for its first 30 failures (a cause that lasts then gets the delays of the
// others, and fewer error reports in the log).
constexpr long kFirstRerouteMs = 250, kLastRerouteMs = 1000;
constexpr int kReroutes = 30;
constexpr size_t kMaxDeferred = 10000;

// The deferred entries not due yet (those due are forgotten: tried again,
// their delay kept until they succeed).
std::vector<int64> entries_not_due() {
    TimestampTz now = GetCurrentTimestamp();
    std::vector<int64> ids;
    for (const auto& [id, entry] : deferred)
        if (entry.retry_at > now) ids.push_back(id);
    return ids;
}

PreparedStatement drop_entry("DELETE FROM wf.outbox WHERE id = $1", {INT8OID});

std::vector<int64> int8_array_values(Datum array) {
    ArrayType* a = call([&] { return DatumGetArrayTypeP(array); });
    int n = call([&] { return ArrayGetNItems(ARR_NDIM(a), ARR_DIMS(a)); });
    const int64* values = reinterpret_cast<const int64*>(ARR_DATA_PTR(a));
    return std::vector<int64>(values, values + n);
}

// wf._parent_ended in the group of `child_queue`.
void deliver(const std::string& child_queue, int64 parent, const std::string& status,
             const std::string& result_literal, const std::string& name,
             const std::vector<int64>& children) {
    call_in_group("_parent_ended", child_queue,
                  std::to_string(parent) + "::pg_catalog.int8, " + sql_literal(status) +
                      "::pg_catalog.text, " + result_literal + ", " + sql_literal(name) +
                      "::pg_catalog.text, " + int8_array_literal(children));
}

// A final status of job (queue, id) and what its dependents read, or
// nothing if it has not ended (retried since) or is gone.
struct End {
    std::string status, result_literal, name;
};
std::optional<End> end_of(const std::string& queue, int64 id) {
    Rows job = run_through_citus(
        "SELECT status, result::text AS result, result IS NULL AS no_result,"
        "       coalesce(step_name, id::text) AS name FROM wf.job"
        " WHERE queue = " + sql_literal(queue) + " AND id = " + std::to_string(id));
    if (job.empty()) return End{"missing", "NULL", std::to_string(id)};
    std::string status = job.text_at(0, "status");
    if (status != "done" && status != "failed" && status != "cancelled") return std::nullopt;
    std::string result = job.bool_at(0, "no_result")
                             ? "NULL"
                             : sql_literal(job.text_at(0, "result")) + "::pg_catalog.jsonb";
    return End{status, result, job.text_at(0, "name")};
}

// 'subscribe': job (child_queue, child) waits on `parents`, somewhere.
void relay_subscription(const std::string& child_queue, int64 child,
                        const std::vector<int64>& parents, const std::string& role_name) {
    // The parents, and the child itself: its workflow.
    std::vector<int64> ids = parents;
    ids.push_back(child);
    Rows found = run_through_citus("SELECT id, queue, coalesce(workflow_id::pg_catalog.text, '') AS workflow"
                                   "  FROM wf.job WHERE id = ANY (" + int8_array_literal(ids) + ")");
    std::map<int64, std::string> queue_of, workflow_of;
    for (uint64 r = 0; r < found.size(); r++) {
        queue_of[found.int64_at(r, "id")] = found.text_at(r, "queue");
        workflow_of[found.int64_at(r, "id")] = found.text_at(r, "workflow");
    }
    const std::string& child_workflow = workflow_of[child];
    Oid role = call([&] { return get_role_oid(role_name.c_str(), true); });
    for (int64 parent : parents) {
        auto where = queue_of.find(parent);
        if (where == queue_of.end()) {
            deliver(child_queue, parent, "missing", "NULL", std::to_string(parent), {child});
            continue;
        }
        const std::string& parent_queue = where->second;
        // A job that waits on others reads their results: its enqueuer
        // needs the right to produce in their queues, as on one server --
        // unless both are steps of one workflow, whose edges were allowed
        // when the steps came in (wf_submit, wf_complete_with_steps).
        bool same_workflow = !child_workflow.empty() && workflow_of[parent] == child_workflow;
        if (!same_workflow && (!OidIsValid(role) || !has_right(role, Capability::produce, parent_queue))) {
            deliver(child_queue, parent, "forbidden", "NULL", parent_queue, {child});
            continue;
        }
        // Subscribed, or told the end it had; a failed parent retried
        // between the two statements is asked again.
        for (int tries = 0; tries < 10; tries++) {
            std::string status = call_in_group_text(
                "_subscribe", parent_queue,
                std::to_string(parent) + "::pg_catalog.int8, " + sql_literal(child_queue) +
                    "::pg_catalog.text, " + std::to_string(child) + "::pg_catalog.int8");
            if (status == "waiting") break;
            std::optional<End> end = end_of(parent_queue, parent);
            if (!end) continue;
            deliver(child_queue, parent, end->status, end->result_literal, end->name, {child});
            break;
        }
    }
}

// 'ended': job (parent_queue, parent) ended; its dependents elsewhere hear
// it. Its group hands over its end and its dependents at once, under its
// lock (wf._take_dependents), so a retry of it cannot come in between.
PreparedStatement unpack_taken(
    "SELECT t ->> 'status' AS status, coalesce(jsonb_typeof(t -> 'result'), 'null') = 'null' AS no_result,"
    "       (t -> 'result')::text AS result, t ->> 'name' AS name,"
    "       c.queue, array_agg(c.id ORDER BY c.id)::text AS children"
    "  FROM (SELECT $1::jsonb AS t) AS x,"
    "       jsonb_to_recordset(x.t -> 'children') AS c(queue text, id bigint)"
    " GROUP BY 1, 2, 3, 4, 5",
    {TEXTOID});

void relay_end(const std::string& parent_queue, int64 parent) {
    std::string taken = call_in_group_text("_take_dependents", parent_queue,
                                           std::to_string(parent) + "::pg_catalog.int8");
    if (taken.empty()) return;  // retried since: its next end is relayed then
    Params<1> p;
    p.set(0, text_datum(taken));
    Rows groups = unpack_taken.execute(p.values, p.nulls);
    struct Delivery {
        std::string queue, status, result, name, children;
    };
    std::vector<Delivery> deliveries;
    for (uint64 r = 0; r < groups.size(); r++)
        deliveries.push_back({groups.text_at(r, "queue"), groups.text_at(r, "status"),
                              groups.bool_at(r, "no_result")
                                  ? std::string("NULL")
                                  : sql_literal(groups.text_at(r, "result")) + "::pg_catalog.jsonb",
                              groups.text_at(r, "name"), groups.text_at(r, "children")});
    for (const Delivery& d : deliveries)
        call_in_group("_parent_ended", d.queue,
                      std::to_string(parent) + "::pg_catalog.int8, " + sql_literal(d.status) +
                          "::pg_catalog.text, " + d.result + ", " + sql_literal(d.name) +
                          "::pg_catalog.text, " + sql_literal(d.children) + "::pg_catalog.int8[]");
}

// 'child': a step of child workflow `workflow` ended. Under the child's
// row (on every node), once every step of it has ended: its outcome
// recorded, and delivered to its parent's group (wf._deliver_child), in
// one transaction.
PreparedStatement outcome_document(
    "SELECT jsonb_build_object('workflow_id', $1::uuid, 'status', $2::text,"
    "                          'results', $3::jsonb, 'error', $4::text)::text AS outcome",
    {TEXTOID, TEXTOID, TEXTOID, TEXTOID});

void relay_child_end(const std::string& workflow) {
    std::string lit = sql_literal(workflow) + "::pg_catalog.uuid";
    // Most ends are not the child's last: a look for an unfinished step,
    // without a lock, sends them away.
    std::string unfinished = "SELECT EXISTS (SELECT 1 FROM wf.job WHERE workflow_id = " + lit +
                             " AND status IN ('blocked', 'pending', 'waiting')) AS unfinished";
    if (run_through_citus(unfinished).bool_at(0, "unfinished")) return;
    // A step adding steps to it (wf_complete_with_steps holds its row) is
    // waited for, then the child's row is taken and its steps read again.
    run_through_citus("SELECT 1 FROM wf.workflow WHERE id = " + lit + " FOR SHARE");
    Rows child = run_through_citus(
        "SELECT parent_queue, parent_id, name, status IS NOT NULL AS finished, delivered,"
        "       outcome::text AS outcome FROM wf.child WHERE workflow_id = " + lit + " FOR UPDATE");
    if (child.empty() || child.bool_at(0, "delivered")) return;
    std::string outcome = child.text_at(0, "outcome");
    if (!child.bool_at(0, "finished")) {
        Datum id = call([&] { return DirectFunctionCall1(uuid_in, CStringGetDatum(workflow.c_str())); });
        WorkflowOutcome ended = read_workflow_outcome(id);
        if (!ended.finished) return;
        Params<4> p;
        p.set(0, text_datum(workflow));
        p.set(1, text_datum(ended.status));
        p.set(2, text_datum(*ended.results_json));
        p.set_or_null(3, !ended.error, ended.error ? text_datum(*ended.error) : 0);
        outcome = outcome_document.execute(p.values, p.nulls).text_at(0, "outcome");
        run_through_citus("UPDATE wf.child SET status = " + sql_literal(ended.status) +
                          ", finished_at = " +
                          timestamptz_literal(TimestampTzGetDatum(GetCurrentTransactionStartTimestamp())) +
                          ", outcome = " + sql_literal(outcome) + "::pg_catalog.jsonb, delivered = true"
                          " WHERE workflow_id = " + lit);
    } else {
        run_through_citus("UPDATE wf.child SET delivered = true WHERE workflow_id = " + lit);
    }
    call_in_group("_deliver_child", child.text_at(0, "parent_queue"),
                  std::to_string(child.int64_at(0, "parent_id")) + "::pg_catalog.int8, " + lit + ", " +
                      sql_literal(child.text_at(0, "name")) + "::pg_catalog.text, " +
                      sql_literal(outcome) + "::pg_catalog.jsonb");
}

}  // namespace

bool defer_failed_entry(int64 id, int code) {
    auto known = deferred.find(id);
    int failures = known == deferred.end() ? 1 : known->second.failures + 1;
    bool misrouted = (code == ERRCODE_FEATURE_NOT_SUPPORTED || code == ERRCODE_T_R_SERIALIZATION_FAILURE) &&
                     failures <= kReroutes;
    long first = misrouted ? kFirstRerouteMs : kFirstRetryMs;
    long last = misrouted ? kLastRerouteMs : kLastRetryMs;
    bool first_misroute = misrouted && (known == deferred.end() || !known->second.misrouted);
    long delay = known == deferred.end() ? first : std::clamp(known->second.delay_ms * 2, first, last);
    if (known == deferred.end() && deferred.size() >= kMaxDeferred) deferred.erase(deferred.begin());
    deferred[id] = {TimestampTzPlusMilliseconds(GetCurrentTimestamp(), delay), delay, failures, misrouted};
    return first_misroute;
}

namespace {
PreparedStatement citus_nodes(
    "SELECT coalesce(string_agg(pg_catalog.format("
    "  '%s:%s (group %s%s, hasmetadata %s, metadatasynced %s, isactive %s)', n.nodename, n.nodeport,"
    "  n.groupid, CASE WHEN n.groupid = l.groupid THEN ', this node' ELSE '' END, n.hasmetadata,"
    "  n.metadatasynced, n.isactive), '; ' ORDER BY n.nodeid), 'none') AS nodes"
    "  FROM pg_catalog.pg_dist_node n, pg_catalog.pg_dist_local_group l",
    {});
}  // namespace

void log_citus_nodes() {
    std::string nodes = citus_nodes.execute().text_at(0, "nodes");
    call([&] {
        ereport(LOG, (errmsg("pg_wf relay: Citus ran a call on a node that does not hold its queue's shard"),
                      errdetail("Citus sends a call to a node only while its entry has hasmetadata and "
                                "metadatasynced; the nodes as this node sees them: %s.",
                                nodes.c_str())));
    });
}

bool relay_one_entry(int64* taken) {
    Params<1> skip;
    skip.set(0, int8_array(entries_not_due()));
    Rows entry = next_entry.execute(skip.values, skip.nulls);
    if (entry.empty()) return false;
    int64 id = entry.int64_at(0, "id");
    *taken = id;
    std::string kind = entry.text_at(0, "kind");
    std::vector<int64> parents = int8_array_values(entry.datum(0, "parent_ids"));
    if (kind == "subscribe") {
        relay_subscription(entry.text_at(0, "child_queue"), entry.int64_at(0, "child_id"), parents,
                           entry.text_at(0, "role_name"));
    } else if (kind == "child") {
        relay_child_end(entry.text_at(0, "workflow_id"));
    } else if (kind == "cancel_child") {
        // Its parent was cancelled: the child is, in every group (its
        // steps' ends come back here as 'child').
        std::string workflow = entry.text_at(0, "workflow_id");
        Datum id = call([&] { return DirectFunctionCall1(uuid_in, CStringGetDatum(workflow.c_str())); });
        cancel_on_cluster(id, true);
    } else if (!parents.empty()) {
        relay_end(entry.text_at(0, "parent_queue"), parents[0]);
    }
    Params<1> p;
    p.set(0, Int64GetDatum(id));
    drop_entry.execute(p.values, p.nulls);
    // Forgotten once relayed (a failure of the commit defers it again).
    deferred.erase(id);
    return true;
}

}  // namespace wf::pg
