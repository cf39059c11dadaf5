// Workflows: a DAG of steps submitted in one call (wf_submit), read back
// (wf_workflow) and cancelled as a whole (wf_cancel_workflow). Steps are
// ordinary jobs that share a workflow_id; the DAG is the dependency edges
// wf_enqueue(depends_on) creates too, so claims and completions of steps
// take the same path, at the same cost, as any job's.
#include <map>

#include "core/error.hpp"
#include "core/validation.hpp"
#include "core/workflow_spec.hpp"
#include "pg/api/frame.hpp"
#include "pg/api/queue_settings.hpp"
#include "pg/runtime/wakeup.hpp"

namespace wf::pg {
namespace {

// The whole workflow in one statement: ids drawn in step order, edges mapped
// from step positions to ids, each step's depends_on, the ready rows of the
// steps without predecessors, and the workflow's row. Arrays carry one
// element per step ($1..$8) or per edge ($9, $10; 1-based step positions).
PreparedStatement insert_workflow(
    "WITH wid AS MATERIALIZED (SELECT gen_random_uuid() AS id),"
    " s AS MATERIALIZED ("
    "  SELECT t.n, nextval('wf.job_id_seq') AS id, t.queue, t.step_name, t.payload,"
    "         t.priority, t.max_attempts, t.run_at, t.pending_deps, t.has_dependents, t.key"
    "    FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::int[],"
    "                $6::timestamptz[], $7::int[], $8::bool[], $13::text[]) WITH ORDINALITY"
    "         AS t(queue, step_name, payload, priority, max_attempts, run_at, pending_deps,"
    "              has_dependents, key, n)"
    "   ORDER BY t.n),"
    " e AS MATERIALIZED ("
    "  SELECT p.id AS parent_id, c.queue AS child_queue, c.id AS child_id"
    "    FROM unnest($9::int[], $10::int[]) AS x(parent_n, child_n)"
    "    JOIN s p ON p.n = x.parent_n JOIN s c ON c.n = x.child_n),"
    " d AS (SELECT child_id, array_agg(parent_id ORDER BY parent_id) AS depends_on"
    "         FROM e GROUP BY child_id),"
    " job AS ("
    "  INSERT INTO wf.job (queue, id, status, payload, run_at, priority, max_attempts,"
    "                      attempt_budget, workflow_id, step_name, depends_on, pending_deps,"
    "                      has_dependents, key)"
    "  SELECT s.queue, s.id, CASE WHEN s.pending_deps > 0 THEN 'blocked' ELSE 'pending' END,"
    "         s.payload::jsonb, coalesce(s.run_at, now()), s.priority,"
    "         coalesce(s.max_attempts, c.max_attempts, " WF_SQL_DEFAULT_MAX_ATTEMPTS "),"
    "         coalesce(s.max_attempts, c.max_attempts, " WF_SQL_DEFAULT_MAX_ATTEMPTS "),"
    "         (SELECT id FROM wid), s.step_name, d.depends_on, s.pending_deps, s.has_dependents,"
    "         s.key"
    "    FROM s LEFT JOIN d ON d.child_id = s.id"
    "           LEFT JOIN wf.queue_config c ON c.queue = s.queue"
    "   ORDER BY s.n"
    "  RETURNING queue, priority, run_at, id, key, status),"
    " edges AS (INSERT INTO wf.dependency (parent_id, child_queue, child_id)"
    "           SELECT parent_id, child_queue, child_id FROM e),"
    WF_SQL_ENTER_READY_NEW("job", WF_SQL_IF_PENDING) ","
    " head AS (INSERT INTO wf.workflow (id, name, steps) SELECT id, $11, $12 FROM wid)"
    " SELECT (SELECT id FROM wid) AS workflow_id,"
    "        ARRAY(SELECT DISTINCT queue FROM job WHERE status = 'pending') AS ready_queues",
    {TEXTARRAYOID, TEXTARRAYOID, TEXTARRAYOID, INT4ARRAYOID, INT4ARRAYOID,
     TIMESTAMPTZARRAYOID, INT4ARRAYOID, BOOLARRAYOID, INT4ARRAYOID, INT4ARRAYOID, TEXTOID,
     INT4OID, TEXTARRAYOID});

// The workflow's summary row (wf.workflows) and every step, in id order
// (the submitted order). Timestamps are in the caller's time zone, as
// to_jsonb prints them.
PreparedStatement describe_workflow(
    "SELECT jsonb_build_object("
    "  'workflow_id', w.workflow_id, 'name', w.name, 'status', w.status,"
    "  'started_at', w.started_at, 'finished_at', w.finished_at,"
    "  'cancelled_at', w.cancelled_at,"
    "  'counts', jsonb_build_object('steps', w.steps, 'blocked', w.blocked,"
    "     'pending', w.pending, 'running', w.running, 'waiting', w.waiting, 'done', w.done,"
    "     'failed', w.failed, 'cancelled', w.cancelled),"
    "  'steps', (SELECT jsonb_agg(jsonb_build_object("
    "        'name', j.step_name, 'id', j.id, 'queue', j.queue, 'status', j.status,"
    "        'attempt', j.attempt, 'max_attempts', j.max_attempts,"
    "        'after', (SELECT jsonb_agg(coalesce(p.step_name, p.id::text) ORDER BY p.id)"
    "                    FROM wf.job p WHERE p.id = ANY (j.depends_on)),"
    "        'run_at', j.run_at, 'created_at', j.created_at, 'started_at', j.started_at,"
    "        'finished_at', j.finished_at, 'last_error', j.last_error, 'result', j.result,"
    "        'waiting_for', j.waiting_for, 'events', j.events, 'worker', j.worker)"
    "        ORDER BY j.id)"
    "     FROM wf.jobs j WHERE j.workflow_id = $1))"
    "  AS described FROM wf.workflows w WHERE w.workflow_id = $1",
    {UUIDOID});

// The queues a workflow's steps are in: acting on it needs a right on each.
PreparedStatement workflow_queues(
    "SELECT DISTINCT queue FROM wf.job WHERE workflow_id = $1", {UUIDOID});

void require_right_on_steps(Datum workflow_id, Capability capability) {
    Params<1> p;
    p.set(0, workflow_id);
    Rows queues = workflow_queues.execute(p.values, p.nulls);
    std::vector<std::string> names;
    for (uint64 r = 0; r < queues.size(); r++) names.push_back(queues.text_at(r, "queue"));
    for (const std::string& queue : names) require_right(capability, queue);
}

PreparedStatement workflow_exists(
    "SELECT 1 AS found WHERE EXISTS (SELECT 1 FROM wf.workflow WHERE id = $1)"
    "    OR EXISTS (SELECT 1 FROM wf.job WHERE workflow_id = $1)",
    {UUIDOID});

Datum uuid_arg(FunctionCallInfo fcinfo, int n, const char* name) {
    core::require_not_null(PG_ARGISNULL(n), name);
    return PG_GETARG_DATUM(n);
}

[[noreturn]] void no_such_workflow(Datum id) {
    char* text = call([&] { return DatumGetCString(DirectFunctionCall1(uuid_out, id)); });
    throw core::Error("42704", std::string("workflow ") + text + " does not exist",
                      {}, "Workflow ids are returned by wf_submit; wf.workflows lists them.");
}

// A step's run_at text as a timestamptz; an error names the step.
Datum parse_run_at(const core::StepSpec& step) {
    try {
        return call([&] {
            return DirectFunctionCall3(timestamptz_in, CStringGetDatum(step.run_at->c_str()),
                                       ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1));
        });
    } catch (const PgError& e) {
        std::string message = e.data()->message ? e.data()->message : "invalid timestamp";
        throw core::Error(core::sqlstate::invalid_parameter,
                          "step \"" + step.name + "\": run_at is not a valid time: " + message,
                          {}, "Give run_at as an ISO 8601 timestamp, e.g. \"2026-12-01T10:00:00Z\".");
    }
}

}  // namespace
}  // namespace wf::pg

using namespace wf;
using namespace wf::pg;

// wf_submit(spec jsonb) -> uuid
WF_SQL_FUNCTION(wf_submit) {
    core::require_not_null(PG_ARGISNULL(0), "spec");
    Datum spec_datum = PG_GETARG_DATUM(0);
    const char* spec_text = call([&] {
        Jsonb* spec = DatumGetJsonbP(spec_datum);
        return JsonbToCString(nullptr, &spec->root, VARSIZE(spec));
    });
    core::WorkflowSpec spec =
        core::parse_workflow_spec(spec_text, static_cast<size_t>(max_payload_size));

    size_t n = spec.steps.size();
    std::vector<Datum> queues(n), names(n), payloads(n), priorities(n), max_attempts(n),
        run_ats(n), pending_deps(n), has_dependents(n), keys(n);
    std::vector<bool> no_nulls, max_attempts_null(n), run_at_null(n), key_null(n);
    std::vector<bool> is_parent(n, false);
    std::vector<Datum> edge_parents, edge_children;
    for (size_t i = 0; i < n; i++)
        for (size_t parent : spec.steps[i].after) {
            is_parent[parent] = true;
            edge_parents.push_back(Int32GetDatum(static_cast<int32>(parent + 1)));
            edge_children.push_back(Int32GetDatum(static_cast<int32>(i + 1)));
        }
    for (size_t i = 0; i < n; i++) {
        const core::StepSpec& step = spec.steps[i];
        queues[i] = text_datum(step.queue);
        names[i] = text_datum(step.name);
        payloads[i] = text_datum(step.payload_json);
        priorities[i] = Int32GetDatum(step.priority);
        max_attempts_null[i] = !step.max_attempts;
        max_attempts[i] = Int32GetDatum(step.max_attempts.value_or(0));
        run_at_null[i] = !step.run_at;
        run_ats[i] = step.run_at ? parse_run_at(step) : 0;
        pending_deps[i] = Int32GetDatum(static_cast<int32>(step.after.size()));
        has_dependents[i] = BoolGetDatum(is_parent[i]);
        key_null[i] = !step.key;
        keys[i] = step.key ? text_datum(*step.key) : 0;
    }

    pg_uuid_t id = with_job_tables([&] {
        for (const core::StepSpec& step : spec.steps) require_right(Capability::produce, step.queue);
        // Steps of an ordered queue need a key, and lock it (flow_control.hpp).
        std::map<std::string, std::vector<std::string>> ordered_keys;
        for (const core::StepSpec& step : spec.steps) {
            if (!queue_settings(text_datum(step.queue)).flow.ordered) continue;
            if (!step.key)
                throw core::Error(core::sqlstate::invalid_parameter,
                                  "step \"" + step.name + "\" is in ordered queue \"" + step.queue +
                                      "\": it needs a \"key\"",
                                  "An ordered queue runs the jobs of each key one at a time, in "
                                  "enqueue order.");
            ordered_keys[step.queue].push_back(*step.key);
        }
        for (auto& [queue, keys] : ordered_keys) lock_keys_for_enqueue(queue, keys);
        Params<13> p;
        p.set(0, datum_array(queues, no_nulls, TEXTOID));
        p.set(1, datum_array(names, no_nulls, TEXTOID));
        p.set(2, datum_array(payloads, no_nulls, TEXTOID));
        p.set(3, datum_array(priorities, no_nulls, INT4OID));
        p.set(4, datum_array(max_attempts, max_attempts_null, INT4OID));
        p.set(5, datum_array(run_ats, run_at_null, TIMESTAMPTZOID));
        p.set(6, datum_array(pending_deps, no_nulls, INT4OID));
        p.set(7, datum_array(has_dependents, no_nulls, BOOLOID));
        p.set(8, datum_array(edge_parents, no_nulls, INT4OID));
        p.set(9, datum_array(edge_children, no_nulls, INT4OID));
        p.set_or_null(10, !spec.name, spec.name ? text_datum(*spec.name) : 0);
        p.set(11, Int32GetDatum(static_cast<int32>(n)));
        p.set(12, datum_array(keys, key_null, TEXTOID));
        Rows submitted = insert_workflow.execute(p.values, p.nulls);

        // The id outlives SPI: copied out by value.
        pg_uuid_t workflow_id;
        std::memcpy(&workflow_id, DatumGetUUIDP(submitted.datum(0, "workflow_id")),
                    sizeof workflow_id);
        Datum ready_queues = submitted.datum(0, "ready_queues");
        call([&] {
            ArrayType* array = DatumGetArrayTypeP(ready_queues);
            Datum* items;
            bool* nulls;
            int count;
            deconstruct_array(array, TEXTOID, -1, false, TYPALIGN_INT, &items, &nulls, &count);
            for (int i = 0; i < count; i++) {
                text* q = DatumGetTextPP(items[i]);
                note_queue_ready(VARDATA_ANY(q), VARSIZE_ANY_EXHDR(q));
            }
        });
        return workflow_id;
    });
    pg_uuid_t* result = call([&] { return static_cast<pg_uuid_t*>(palloc(sizeof(pg_uuid_t))); });
    *result = id;
    PG_RETURN_UUID_P(result);
}

// wf_workflow(workflow_id uuid) -> jsonb: the workflow and every step.
WF_SQL_FUNCTION(wf_workflow) {
    Datum id = uuid_arg(fcinfo, 0, "workflow_id");
    Datum result = with_job_tables([&] {
        require_right_on_steps(id, Capability::operate);
        Params<1> p;
        p.set(0, id);
        Rows described = describe_workflow.execute(p.values, p.nulls);
        if (described.size() != 1) no_such_workflow(id);
        // Copied out of SPI memory, which SPI_finish frees.
        Datum value = described.datum(0, "described");
        return call([&] { return SPI_datumTransfer(value, false, -1); });
    });
    PG_RETURN_DATUM(result);
}

// wf_cancel_workflow(workflow_id uuid) -> int: steps cancelled or flagged.
WF_SQL_FUNCTION(wf_cancel_workflow) {
    Datum id = uuid_arg(fcinfo, 0, "workflow_id");
    int32 cancelled = with_job_tables([&] {
        Params<1> p;
        p.set(0, id);
        if (workflow_exists.execute(p.values, p.nulls).empty()) no_such_workflow(id);
        require_right_on_steps(id, Capability::operate);
        return cancel_workflow_steps(id);
    });
    PG_RETURN_INT32(cancelled);
}
