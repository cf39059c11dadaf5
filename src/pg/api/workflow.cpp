// Workflows: a DAG of steps submitted in one call (wf_submit), read back
// (wf_workflow) and cancelled as a whole (wf_cancel_workflow). Steps are
// ordinary jobs that share a workflow_id; the DAG is the dependency edges
// wf_enqueue(depends_on) creates too, so claims and completions of steps
// take the same path, at the same cost, as any job's.
#include <map>
#include <set>

#include "core/error.hpp"
#include "core/validation.hpp"
#include "core/workflow_spec.hpp"
#include "pg/api/events.hpp"
#include "pg/api/frame.hpp"
#include "pg/api/queue_settings.hpp"
#include "pg/api/workflow.hpp"
#include "pg/citus/cluster_calls.hpp"
#include "pg/jobs/children.hpp"
#include "pg/jobs/job_inserts.hpp"
#include "pg/jobs/job_state.hpp"
#include "pg/runtime/metrics.hpp"
#include "pg/runtime/wakeup.hpp"

namespace wf::pg {
namespace {

// After a workflow's steps and their edges are inserted by hand
// (job_inserts.hpp), the workflow's row ($6: a new one) or its new step
// count (more steps of an existing one).
PreparedStatement insert_workflow(
    "WITH head AS (INSERT INTO wf.workflow (id, name, steps, key, child_of)"
    "              SELECT $1, $2, $3, $4, $5 WHERE $6),"
    " grown AS (UPDATE wf.workflow SET steps = steps + $3 WHERE NOT $6 AND id = $1)"
    " SELECT 1 AS done",
    {UUIDOID, TEXTOID, INT4OID, TEXTOID, INT8OID, BOOLOID});

// A new workflow's id: a random (version 4) UUID, as gen_random_uuid().
pg_uuid_t random_uuid() {
    pg_uuid_t id;
    call([&] {
        if (!pg_strong_random(id.data, UUID_LEN))
            ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR), errmsg("could not generate random values")));
    });
    id.data[6] = (id.data[6] & 0x0f) | 0x40;
    id.data[8] = (id.data[8] & 0x3f) | 0x80;
    return id;
}

// A workflow's step ids, drawn in step order (one sequence: ascending).
PreparedStatement take_ids(
    "SELECT nextval('wf.job_id_seq') AS id FROM generate_series(1, $1)", {INT4OID});

// Workflow keys (wf_submit's "key", wf_signal_with_start). The key's row is
// taken (or made) and locked: a racing start with the same key waits here
// until this one commits. The nil uuid: the row is new.
PreparedStatement lock_workflow_key(
    "INSERT INTO wf.workflow_key AS k (key, workflow_id)"
    " VALUES ($1, '00000000-0000-0000-0000-000000000000')"
    " ON CONFLICT (key) DO UPDATE SET workflow_id = k.workflow_id"
    " RETURNING k.workflow_id",
    {TEXTOID});

// Read with the latest snapshot: the holder may have been started by the
// racing transaction this one just waited for. Its unfinished steps are
// locked FOR SHARE, which waits for a completion in flight (a claim locks
// no row, so a running step costs no wait): a workflow whose last step is
// ending is not taken for active, to be signalled after it is over.
PreparedStatement workflow_active(
    "SELECT count(*) > 0 AS active FROM ("
    "  SELECT 1 FROM wf.job WHERE workflow_id = $1"
    "     AND status IN ('blocked', 'pending', 'waiting') FOR SHARE) AS unfinished",
    {UUIDOID});

PreparedStatement set_workflow_key(
    "UPDATE wf.workflow_key SET workflow_id = $2 WHERE key = $1", {TEXTOID, UUIDOID});

// Child workflows (wf_start_child): one per parent job and name.
PreparedStatement find_child(
    "SELECT workflow_id FROM wf.child WHERE parent_queue = $1 AND parent_id = $2 AND name = $3",
    {TEXTOID, INT8OID, TEXTOID});

PreparedStatement record_child(
    "INSERT INTO wf.child (parent_queue, parent_id, name, workflow_id) VALUES ($1, $2, $3, $4)",
    {TEXTOID, INT8OID, TEXTOID, UUIDOID});

// Steps are added to a workflow one transaction at a time.
PreparedStatement lock_workflow_row(
    "SELECT 1 FROM wf.workflow WHERE id = $1 FOR UPDATE", {UUIDOID});

PreparedStatement workflow_steps(
    "SELECT coalesce(step_name, id::text) AS name, id, status FROM wf.job WHERE workflow_id = $1",
    {UUIDOID});

PreparedStatement flag_parents(
    "UPDATE wf.job SET has_dependents = true WHERE id = ANY ($1) AND NOT has_dependents",
    {INT8ARRAYOID});

// The workflow's summary row (wf.workflows) and every step, in id order
// (the submitted order). Timestamps are in the caller's time zone, as
// to_jsonb prints them.
PreparedStatement describe_workflow(
    "SELECT jsonb_build_object("
    "  'workflow_id', w.workflow_id, 'name', w.name, 'status', w.status,"
    "  'started_at', w.started_at, 'finished_at', w.finished_at,"
    "  'cancelled_at', w.cancelled_at, 'key', w.key, 'child_of', w.child_of,"
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
    "        'waiting_for', j.waiting_for, 'events', j.events, 'worker', j.worker,"
    "        'version', j.version, 'progress', j.progress,"
    // The child workflows a step started, in the order it started them.
    "        'children', (SELECT jsonb_agg(jsonb_build_object('name', c.name,"
    "                       'workflow_id', c.workflow_id, 'status', coalesce(c.status, 'running'))"
    "                       ORDER BY c.started_at, c.name)"
    "                       FROM wf.child c WHERE c.parent_queue = j.queue AND c.parent_id = j.id))"
    "        ORDER BY j.id)"
    "     FROM wf.jobs j WHERE j.workflow_id = $1))"
    "  AS described FROM wf.workflows w WHERE w.workflow_id = $1",
    {UUIDOID});

PreparedStatement workflow_queues(
    "SELECT DISTINCT queue FROM wf.job WHERE workflow_id = $1", {UUIDOID});

void require_right_on_steps(Datum workflow_id, Capability capability) {
    for (const std::string& queue : workflow_step_queues(workflow_id)) require_right(capability, queue);
}

PreparedStatement workflow_exists(
    "SELECT 1 AS found WHERE EXISTS (SELECT 1 FROM wf.workflow WHERE id = $1)"
    "    OR EXISTS (SELECT 1 FROM wf.job WHERE workflow_id = $1)",
    {UUIDOID});

Datum uuid_arg(FunctionCallInfo fcinfo, int n, const char* name) {
    core::require_not_null(PG_ARGISNULL(n), name);
    return PG_GETARG_DATUM(n);
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

// Wakes the claimers of each queue in `queues` (a text[] of queues whose
// new steps are pending).
void note_ready_queues(Datum queues) {
    call([&] {
        ArrayType* array = DatumGetArrayTypeP(queues);
        Datum* items;
        bool* nulls;
        int count;
        deconstruct_array(array, TEXTOID, -1, false, TYPALIGN_INT, &items, &nulls, &count);
        for (int i = 0; i < count; i++) {
            text* q = DatumGetTextPP(items[i]);
            note_queue_ready(VARDATA_ANY(q), VARSIZE_ANY_EXHDR(q));
        }
    });
}

// Where insert_steps puts a spec's steps.
struct StepsTarget {
    std::optional<Datum> workflow_id;          // an existing workflow (fan-out)
    std::optional<int64> child_of;             // the parent job of a child workflow
    std::optional<std::string> default_version;  // of steps that name none (before the queue's)
    std::map<std::string, int64> existing;     // done steps "after" may name, by name
};

// The edges of `n` steps as (parent, child) step indexes, by parent id, then
// child id: ids are taken in step order, so by parent index, then child
// index (a child's queue sorts between the two ids only when a parent's
// children are in several queues; the index then takes them out of order).
std::vector<std::pair<size_t, size_t>> edges_in_key_order(const core::StepSpec* steps, size_t n) {
    std::vector<std::pair<size_t, size_t>> edges;
    for (size_t child = 0; child < n; child++)
        for (size_t parent : steps[child].after) edges.emplace_back(parent, child);
    std::sort(edges.begin(), edges.end());
    return edges;
}

// The steps of `spec`, in one statement: a new workflow (its id returned),
// or more steps of an existing one. Checks the right to produce in every
// step's queue, and locks the keys of ordered queues.
pg_uuid_t insert_steps(const core::WorkflowSpec& spec, const StepsTarget& target) {
    size_t n = spec.steps.size();
    for (const core::StepSpec& step : spec.steps) require_right(Capability::produce, step.queue);
    Params<1> how_many;
    how_many.set(0, Int32GetDatum(static_cast<int32>(n)));
    std::vector<int64> ids = take_ids.execute(how_many.values, how_many.nulls).int64_column("id");

    // The workflow's id: the existing one's, or a new one.
    pg_uuid_t workflow_id = target.workflow_id ? *DatumGetUUIDP(*target.workflow_id) : random_uuid();
    if (!target.workflow_id && target.child_of) lock_new_child_workflow(workflow_id);
    Datum workflow_datum = UUIDPGetDatum(&workflow_id);

    // Each step's job: a step waits on its new predecessors (its edges,
    // written below); a done step it runs after (wf_complete_with_steps) is
    // in its depends_on, for the inputs, and nothing to wait for.
    std::vector<NewJob> jobs(n);
    for (size_t i = 0; i < n; i++) {
        const core::StepSpec& step = spec.steps[i];
        NewJob& job = jobs[i];
        job.queue = text_datum(step.queue);
        job.id = ids[i];
        for (size_t parent : step.after) {
            jobs[parent].has_dependents = true;
            job.depends_on.push_back(ids[parent]);
        }
        for (const std::string& name : step.after_existing) job.depends_on.push_back(target.existing.at(name));
        std::sort(job.depends_on.begin(), job.depends_on.end());
        job.pending_deps = static_cast<int32>(step.after.size());
        job.status = job.pending_deps > 0 ? "blocked" : "pending";
        job.workflow_id = workflow_datum;
        job.step_name = text_datum(step.name);
        job.priority = step.priority;
        QueueSettings settings = queue_settings(job.queue);
        job.max_attempts = step.max_attempts.value_or(settings.max_attempts);
        job.key_order = settings.flow.by_key();  // a root's ready row (key_order.hpp)
        if (step.run_at) job.run_at = parse_run_at(step);
        if (step.key) job.key = text_datum(*step.key);
        // The step's version, else the workflow's, else the parent's (a
        // child workflow, steps added by a step), else the queue's.
        std::optional<std::string> version = step.version ? step.version
                                             : spec.version ? spec.version
                                                            : target.default_version;
        if (!version) version = settings.version;
        if (version) job.version = text_datum(*version);
    }

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

    NewJob* rows = jobs.data();
    const core::StepSpec* steps = spec.steps.data();
    // Made here, not in call()'s function, which an error leaves by longjmp.
    std::vector<std::pair<size_t, size_t>> edge_order = edges_in_key_order(steps, n);
    Datum child_of = Int64GetDatum(target.child_of.value_or(0));
    bool child_of_null = !target.child_of;
    call([&] {
        JobInserts inserts;
        inserts.open("wf_submit");
        for (size_t i = 0; i < n; i++) {
            // The payload: formed already (read_jsonb_spec), or the JSON
            // text the spec's reader wrote, as jsonb, freed with the rows
            // once they are written.
            MemoryContext outer = MemoryContextSwitchTo(inserts.rows);
            rows[i].payload = steps[i].payload_formed != 0
                                  ? static_cast<Datum>(steps[i].payload_formed)
                                  : DirectFunctionCall1(jsonb_in, CStringGetDatum(steps[i].payload_json.c_str()));
            MemoryContextSwitchTo(outer);
            inserts.add(rows[i], child_of, child_of_null);
        }
        inserts.flush();
        // The edges (parent -> step, in the step's queue), in the same
        // statement's snapshot and command, in the order of
        // dependency_pkey (parent_id, ...): each entry then goes to the
        // index's rightmost leaf, which fills, instead of to a leaf in the
        // middle that splits in half (edges fanning in across stages).
        DependencyInserts edges;
        edges.open("wf_submit");
        for (const auto& [parent, child] : edge_order) {
            edges.add(rows[parent].id, rows[child].queue, rows[child].id);
            if (edges.full()) edges.flush(inserts.snapshot, inserts.command);
        }
        edges.flush(inserts.snapshot, inserts.command);
        edges.close();
        inserts.close();
    });

    Params<6> p;
    p.set(0, workflow_datum);
    p.set_or_null(1, !spec.name, spec.name ? text_datum(*spec.name) : 0);
    p.set(2, Int32GetDatum(static_cast<int32>(n)));
    p.set_or_null(3, !spec.key, spec.key ? text_datum(*spec.key) : 0);
    p.set_or_null(4, !target.child_of, child_of);
    p.set(5, BoolGetDatum(!target.workflow_id));
    insert_workflow.execute(p.values, p.nulls);
    for (const core::StepSpec& step : spec.steps) count(step.queue, Metric::enqueued);

    std::set<std::string> ready_queues;
    for (const core::StepSpec& step : spec.steps)
        if (step.after.empty()) ready_queues.insert(step.queue);  // pending at once
    for (const std::string& queue : ready_queues) note_queue_ready(queue);
    return workflow_id;
}

// Keys are one namespace: the workflow that holds one is the caller's only
// if it may produce in every queue of its steps.
void require_right_on_held_key(const std::string& key, const std::string& queue) {
    if (has_right(RunAsOwner::caller(), Capability::produce, queue)) return;
    throw core::Error(core::sqlstate::insufficient_privilege,
                      "workflow key \"" + key + "\" is held by a workflow in queues you may not produce in",
                      "An active workflow with this key has a step in queue \"" + queue + "\".",
                      "Keys are shared by every role: prefix them with your tenant or application.");
}

// A new workflow, or with a "key" the active workflow that holds the key
// (two racing starts with one key start one workflow).
pg_uuid_t start_workflow(const core::WorkflowSpec& spec) {
    if (!spec.key) return insert_steps(spec, {});
    // Rights first: a caller without them learns nothing of the key.
    for (const core::StepSpec& step : spec.steps) require_right(Capability::produce, step.queue);
    Params<2> p;
    p.set(0, text_datum(*spec.key));
    pg_uuid_t holder = lock_workflow_key.execute(p.values, p.nulls).uuid_at(0, "workflow_id");
    static const pg_uuid_t nil{};
    if (std::memcmp(&holder, &nil, sizeof holder) != 0) {
        Params<1> w;
        w.set(0, UUIDPGetDatum(&holder));
        if (workflow_active.execute_latest(w.values, w.nulls).bool_at(0, "active")) {
            // Keys are one namespace: the workflow that holds this one is the
            // caller's only if it may produce in every queue of its steps.
            for (const std::string& queue : workflow_step_queues(w.values[0]))
                require_right_on_held_key(*spec.key, queue);
            return holder;
        }
    }
    pg_uuid_t id = insert_steps(spec, {});
    p.set(1, UUIDPGetDatum(&id));
    set_workflow_key.execute(p.values, p.nulls);
    return id;
}

// A spec (jsonb) read token by token into the spec reader, with no JSON text
// in between: the tokens of a chunk are taken from the jsonb inside call(),
// then read by the C++ reader outside it. Strings are views into the jsonb;
// numbers are written as text (numeric_out, as jsonb's own text output) into
// a context reset per chunk. A step's payload that is an object or an array
// is not walked: its container is copied whole into a jsonb of its own (the
// job's payload as it will be written, in the caller's memory context) and
// given to the reader formed, its Datum the handle. `steps_only`: the jsonb
// is an array of steps (wf_complete_with_steps), read as {"steps": [...]}.
core::WorkflowSpec read_jsonb_spec(Datum spec_datum, bool steps_only = false,
                                   const std::vector<std::string>& existing_steps = {},
                                   const std::string& default_queue = {}) {
    using Event = core::JsonEvent;
    core::WorkflowSpecReader reader(static_cast<size_t>(max_payload_size));
    if (steps_only) {
        reader.read(Event{Event::Type::begin_object});
        reader.read(Event{Event::Type::key, "steps"});
    }
    constexpr size_t kChunk = 1024;
    std::vector<Event> events(kChunk);
    Event* out = events.data();
    struct Walk {
        JsonbIterator* it;
        MemoryContext numbers;
        MemoryContext payloads;  // the caller's: the payloads live until they are written
        bool scalar_root;  // a lone scalar: jsonb wraps it in an array of one
        bool done;
        // Where the walk is: containers open, whether the array at
        // steps_depth is the spec's steps, whether the last key of the root
        // object was "steps", whether the next value is a step's payload.
        int depth;
        int steps_depth;
        bool in_steps;
        bool root_key_is_steps;
        bool payload_next;
    };
    Walk walk = call([&] {
        Jsonb* spec = DatumGetJsonbP(spec_datum);
        return Walk{JsonbIteratorInit(&spec->root),
                    AllocSetContextCreate(CurrentMemoryContext, "wf spec numbers",
                                          ALLOCSET_SMALL_SIZES),
                    CurrentMemoryContext, JB_ROOT_IS_SCALAR(spec), false,
                    0, steps_only ? 1 : 2, false, false, false};
    });
    auto is_key = [](const JsonbValue& v, const char* name) {
        size_t length = strlen(name);
        return static_cast<size_t>(v.val.string.len) == length &&
               memcmp(v.val.string.val, name, length) == 0;
    };
    while (!walk.done) {
        size_t count = call([&] {
            MemoryContextReset(walk.numbers);
            size_t k = 0;
            JsonbValue v;
            while (k < kChunk) {
                // A step's payload comes whole (jbvBinary) when a container.
                bool payload = walk.payload_next;
                walk.payload_next = false;
                switch (JsonbIteratorNext(&walk.it, &v, payload)) {
                    case WJB_DONE:
                        walk.done = true;
                        return k;
                    case WJB_BEGIN_OBJECT:
                        walk.depth++;
                        out[k++] = Event{Event::Type::begin_object};
                        break;
                    case WJB_END_OBJECT:
                        walk.depth--;
                        out[k++] = Event{Event::Type::end_object};
                        break;
                    case WJB_BEGIN_ARRAY:
                        walk.depth++;
                        if (walk.depth == walk.steps_depth && !walk.scalar_root)
                            walk.in_steps = walk.steps_depth == 1 || walk.root_key_is_steps;
                        if (!walk.scalar_root) out[k++] = Event{Event::Type::begin_array};
                        break;
                    case WJB_END_ARRAY:
                        if (walk.depth == walk.steps_depth) walk.in_steps = false;
                        walk.depth--;
                        if (!walk.scalar_root) out[k++] = Event{Event::Type::end_array};
                        break;
                    case WJB_KEY:
                        if (walk.depth == 1) walk.root_key_is_steps = is_key(v, "steps");
                        walk.payload_next = walk.in_steps && walk.depth == walk.steps_depth + 1 &&
                                            is_key(v, "payload");
                        out[k++] = Event{Event::Type::key,
                                         std::string_view(v.val.string.val, v.val.string.len)};
                        break;
                    case WJB_VALUE:
                    case WJB_ELEM:
                        switch (v.type) {
                            case jbvBinary: {  // a step's payload, skipped over whole
                                MemoryContext outer = MemoryContextSwitchTo(walk.payloads);
                                Jsonb* formed = JsonbValueToJsonb(&v);
                                MemoryContextSwitchTo(outer);
                                Event e{Event::Type::formed};
                                e.handle = static_cast<uint64>(PointerGetDatum(formed));
                                e.bytes = VARSIZE(formed) - VARHDRSZ;
                                out[k++] = e;
                                break;
                            }
                            case jbvString:
                                out[k++] = Event{Event::Type::string,
                                                 std::string_view(v.val.string.val, v.val.string.len)};
                                break;
                            case jbvNumeric: {
                                MemoryContext outer = MemoryContextSwitchTo(walk.numbers);
                                const char* digits = DatumGetCString(
                                    DirectFunctionCall1(numeric_out, NumericGetDatum(v.val.numeric)));
                                MemoryContextSwitchTo(outer);
                                out[k++] = Event{Event::Type::number, std::string_view(digits)};
                                break;
                            }
                            case jbvBool:
                                out[k++] = Event{Event::Type::boolean, v.val.boolean ? "true" : "false"};
                                break;
                            default:  // jbvNull; nested containers come as BEGIN tokens
                                out[k++] = Event{Event::Type::null};
                                break;
                        }
                        break;
                }
            }
            return k;
        });
        for (size_t i = 0; i < count; i++) reader.read(out[i]);
    }
    call([&] { MemoryContextDelete(walk.numbers); });
    if (steps_only) reader.read(Event{Event::Type::end_object});
    return reader.finish(existing_steps, default_queue);
}

// A spec argument, not NULL.
Datum spec_arg(FunctionCallInfo fcinfo, int n, const char* name) {
    core::require_not_null(PG_ARGISNULL(n), name);
    return PG_GETARG_DATUM(n);
}

Datum uuid_result(const pg_uuid_t& id) {
    pg_uuid_t* result = call([&] { return static_cast<pg_uuid_t*>(palloc(sizeof(pg_uuid_t))); });
    *result = id;
    return UUIDPGetDatum(result);
}

// wf_complete_with_steps: only a workflow's step adds steps to it.
void require_workflow_step(const RunningAttempt& step, const FencingToken& token) {
    if (step.workflow_id) return;
    throw core::Error("55000", "job " + std::to_string(token.id) + " is not a workflow step",
                      "Steps can be added only to the workflow of the completing step.",
                      "Use wf_complete, or wf_submit for a new workflow.");
}

// The steps wf_complete_with_steps adds, among the workflow's steps `names`
// (`done`: those done, the completing one among them); a step without a
// queue is in the completing step's. Added steps run after new ones and
// after done ones only.
core::WorkflowSpec parse_added_steps(Datum steps, const std::vector<std::string>& names,
                                     const std::map<std::string, bool>& done,
                                     const FencingToken& token) {
    core::WorkflowSpec spec = read_jsonb_spec(steps, true, names, std::string(token.queue_name));
    for (const core::StepSpec& added : spec.steps)
        for (const std::string& parent : added.after_existing) {
            auto found = done.find(parent);
            if (found == done.end() || !found->second)
                throw core::Error(core::sqlstate::invalid_parameter,
                                  "step \"" + added.name + "\" runs after step \"" + parent +
                                      "\", which is not done",
                                  "Added steps may run after new steps and after steps "
                                  "that are done (the completing one among them).");
        }
    return spec;
}

// ---- workflows on a distributed pg_wf (1.8) ----
// A workflow's steps are jobs of their queues' shard groups. wf_submit on
// the coordinator draws the steps' ids from its own range, then each group
// inserts its steps (wf._insert_steps) and the workflow's row goes to every
// node, in the caller's transaction (two-phase across the nodes). An edge
// between steps of two groups is a dependency between groups
// (remote_dependencies.hpp): the child step is blocked, counting it, and
// its node's worker subscribes it after the commit.

PreparedStatement new_workflow_id("SELECT gen_random_uuid() AS id", {});

// One group's steps ($2: a JSON array of objects, built by submit_on_cluster).
#define WF_SQL_GROUP_STEPS(JSON)                                                           \
    "SELECT * FROM jsonb_to_recordset(" JSON ") AS x(id bigint, queue text, step_name text," \
    " payload jsonb, priority int, max_attempts int, run_at timestamptz, pending_deps int,"  \
    " has_dependents boolean, key text, version text, depends_on bigint[], edges bigint[],"      \
    " remote bigint[], child_of bigint)"
PreparedStatement insert_group_steps(
    "WITH s AS MATERIALIZED (" WF_SQL_GROUP_STEPS("$2") "),"
    " job AS ("
    "  INSERT INTO wf.job (queue, id, status, payload, run_at, priority, max_attempts,"
    "                      attempt_budget, workflow_id, step_name, depends_on, pending_deps,"
    "                      has_dependents, key, version, child_of)"
    "  SELECT s.queue, s.id, CASE WHEN s.pending_deps > 0 THEN 'blocked' ELSE 'pending' END,"
    "         s.payload, coalesce(s.run_at, now()), s.priority,"
    "         coalesce(s.max_attempts, c.max_attempts, " WF_SQL_DEFAULT_MAX_ATTEMPTS "),"
    "         coalesce(s.max_attempts, c.max_attempts, " WF_SQL_DEFAULT_MAX_ATTEMPTS "),"
    "         $1, s.step_name, s.depends_on, s.pending_deps, s.has_dependents, s.key,"
    "         coalesce(s.version, c.version), s.child_of"
    "    FROM s LEFT JOIN wf.queue_config c ON c.queue = s.queue"
    "   ORDER BY s.id"
    "  RETURNING queue, priority, run_at, id, key, version, status),"
    " edges AS (INSERT INTO wf.dependency (parent_id, child_queue, child_id)"
    "           SELECT unnest(coalesce(s.edges, s.depends_on)), s.queue, s.id FROM s),"
    WF_SQL_ENTER_READY_NEW("job", WF_SQL_IF_PENDING)
    " SELECT ARRAY(SELECT DISTINCT queue FROM job WHERE status = 'pending') AS ready_queues",
    {UUIDOID, JSONBOID});
// The steps waiting on steps of other groups: the node's worker subscribes
// them (wf.outbox is the node's own table).
PreparedStatement group_step_keys(
    "SELECT s.queue, s.key, s.step_name FROM (" WF_SQL_GROUP_STEPS("$1") ") AS s ORDER BY s.id",
    {JSONBOID});
PreparedStatement subscribe_group_steps(
    "INSERT INTO wf.outbox (kind, parent_ids, child_queue, child_id, role_name)"
    " SELECT 'subscribe', s.remote, s.queue, s.id, $2"
    "   FROM (" WF_SQL_GROUP_STEPS("$1") ") AS s WHERE cardinality(s.remote) > 0"
    " RETURNING id",
    {JSONBOID, TEXTOID});

// A JSON string literal of `s` (RFC 8259 escapes).
std::string json_string(std::string_view s) {
    std::string out = "\"";
    for (unsigned char ch : s) {
        if (ch == '"' || ch == '\\') {
            out += '\\';
            out += static_cast<char>(ch);
        } else if (ch < 0x20) {
            char buf[8];
            snprintf(buf, sizeof buf, "\\u%04x", ch);
            out += buf;
        } else {
            out += static_cast<char>(ch);
        }
    }
    return out + "\"";
}

std::string json_ids(const std::vector<int64>& ids) {
    std::string out = "[";
    for (size_t i = 0; i < ids.size(); i++) out += (i ? "," : "") + std::to_string(ids[i]);
    return out + "]";
}

// A step's payload as JSON text: the reader's, or its formed jsonb's.
std::string payload_text(const core::StepSpec& step) {
    if (step.payload_formed == 0) return step.payload_json;
    Jsonb* formed = reinterpret_cast<Jsonb*>(static_cast<Datum>(step.payload_formed));
    return call([&] { return JsonbToCString(nullptr, &formed->root, VARSIZE(formed)); });
}

std::string uuid_text(const pg_uuid_t& id) {
    pg_uuid_t copy = id;
    char* text = call([&] { return DatumGetCString(DirectFunctionCall1(uuid_out, UUIDPGetDatum(&copy))); });
    return text;
}

// Workflow keys on a distributed pg_wf, as start_workflow on one server:
// wf.workflow_key is a reference table, so the key's row is taken (or made)
// and locked on every node, and a racing start with the same key waits for
// this one. The holder is active while a step of it is unfinished, each of
// its queues read in its group under FOR SHARE (a completion in flight is
// waited for, as on one server). Returns the active holder, if any.
std::optional<pg_uuid_t> lock_key_on_cluster(const std::string& key) {
    Rows taken = run_through_citus(
        "INSERT INTO wf.workflow_key AS k (key, workflow_id) VALUES (" + sql_literal(key) +
        ", '00000000-0000-0000-0000-000000000000') ON CONFLICT (key)"
        " DO UPDATE SET workflow_id = k.workflow_id RETURNING k.workflow_id::pg_catalog.text AS holder");
    std::string holder = taken.text_at(0, "holder");
    if (holder == "00000000-0000-0000-0000-000000000000") return std::nullopt;
    std::string lit = sql_literal(holder) + "::pg_catalog.uuid";
    Rows queues = run_through_citus("SELECT DISTINCT queue FROM wf.job WHERE workflow_id = " + lit);
    bool active = false;
    for (uint64 r = 0; r < queues.size() && !active; r++)
        active = !run_through_citus("SELECT 1 AS unfinished FROM wf.job WHERE queue = " +
                                    sql_literal(queues.text_at(r, "queue")) + " AND workflow_id = " +
                                    lit + " AND status IN ('blocked', 'pending', 'waiting') FOR SHARE")
                      .empty();
    if (!active) return std::nullopt;
    for (uint64 r = 0; r < queues.size(); r++)
        require_right_on_held_key(key, queues.text_at(r, "queue"));
    pg_uuid_t id;
    Datum parsed = call([&] { return DirectFunctionCall1(uuid_in, CStringGetDatum(holder.c_str())); });
    std::memcpy(&id, DatumGetUUIDP(parsed), sizeof id);
    return id;
}

// Refuses until wf_distribute() handed the 1.8 tables to Citus: edges
// between groups need them.
void require_cross_group_tables() {
    if (!run_through_citus("SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition"
                           " WHERE logicalrelid = 'wf.remote_input'::pg_catalog.regclass) AS d")
             .bool_at(0, "d"))
        throw core::Error("55000", "pg_wf's 1.8 tables are not distributed yet",
                          "ALTER EXTENSION pg_wf UPDATE added them; wf_distribute() hands them to Citus.",
                          "Run SELECT wf_distribute() on the coordinator.");
}

// Each queue's shard group (its shard of wf.job), as Citus places it.
void find_shards(std::map<std::string, int64>& shard_of) {
    std::string list;
    for (const auto& [queue, shard] : shard_of) list += (list.empty() ? "" : ", ") + sql_literal(queue);
    Rows shards = run_through_citus(
        "SELECT q AS queue, pg_catalog.get_shard_id_for_distribution_column('wf.job', q) AS shard"
        "  FROM pg_catalog.unnest(ARRAY[" + list + "]::pg_catalog.text[]) AS q");
    for (uint64 r = 0; r < shards.size(); r++) shard_of[shards.text_at(r, "queue")] = shards.int64_at(r, "shard");
}

// Where insert_steps_on_cluster puts a spec's steps (StepsTarget on one
// server): a new workflow, or more steps of `workflow_id`, whose steps
// done already `existing` names (a step "after" one of them reads its
// result: in its own group from the row, from another group as a
// dependency between groups, delivered at once).
struct ClusterStepsTarget {
    struct Existing {
        int64 id;
        std::string queue;
    };
    std::map<std::string, Existing> existing;
    std::optional<int64> child_of;
    std::optional<std::string> default_version;
};

// The steps of `spec`, each group's inserted by wf._insert_steps there;
// the caller has checked the right to produce in their queues.
void insert_steps_on_cluster(const core::WorkflowSpec& spec, const pg_uuid_t& workflow_id,
                             const ClusterStepsTarget& target) {
    std::map<std::string, int64> shard_of;
    for (const core::StepSpec& step : spec.steps) shard_of[step.queue] = 0;
    for (const auto& [name, step] : target.existing) shard_of[step.queue] = 0;
    find_shards(shard_of);

    size_t n = spec.steps.size();
    Params<1> how_many;
    how_many.set(0, Int32GetDatum(static_cast<int32>(n)));
    std::vector<int64> ids = take_ids.execute(how_many.values, how_many.nulls).int64_column("id");

    std::vector<bool> is_parent(n, false);
    for (const core::StepSpec& step : spec.steps)
        for (size_t parent : step.after) is_parent[parent] = true;
    // One JSON array of steps per group, and a queue of it to address it by.
    std::map<int64, std::string> steps_of, queue_of;
    for (size_t i = 0; i < n; i++) {
        const core::StepSpec& step = spec.steps[i];
        int64 shard = shard_of[step.queue];
        // parents: all (the inputs); edges: those it waits on (a done step
        // of its own group is not waited on); remote: those in other groups.
        std::vector<int64> parents, edges, remote;
        for (size_t parent : step.after) {
            parents.push_back(ids[parent]);
            edges.push_back(ids[parent]);
            if (shard_of[spec.steps[parent].queue] != shard) remote.push_back(ids[parent]);
        }
        for (const std::string& name : step.after_existing) {
            const ClusterStepsTarget::Existing& done = target.existing.at(name);
            parents.push_back(done.id);
            if (shard_of[done.queue] == shard) continue;
            edges.push_back(done.id);
            remote.push_back(done.id);
        }
        std::optional<std::string> version = step.version     ? step.version
                                             : spec.version ? spec.version
                                                            : target.default_version;
        std::string run_at;
        if (step.run_at) {
            // ISO 8601 with its offset, whatever this session's DateStyle:
            // the group's node reads it with its own settings.
            Datum t = parse_run_at(step);
            char* text = call([&] { return JsonEncodeDateTime(nullptr, t, TIMESTAMPTZOID, nullptr); });
            run_at = json_string(text);
        }
        std::string object =
            "{\"id\":" + std::to_string(ids[i]) + ",\"queue\":" + json_string(step.queue) +
            ",\"step_name\":" + json_string(step.name) + ",\"payload\":" + payload_text(step) +
            ",\"priority\":" + std::to_string(step.priority) +
            ",\"max_attempts\":" + (step.max_attempts ? std::to_string(*step.max_attempts) : "null") +
            ",\"run_at\":" + (step.run_at ? run_at : "null") +
            ",\"pending_deps\":" + std::to_string(edges.size()) +
            ",\"has_dependents\":" + (is_parent[i] ? "true" : "false") +
            ",\"key\":" + (step.key ? json_string(*step.key) : "null") +
            ",\"version\":" + (version ? json_string(*version) : "null") +
            ",\"depends_on\":" + (parents.empty() ? "null" : json_ids(parents)) +
            ",\"edges\":" + json_ids(edges) + ",\"remote\":" + json_ids(remote) +
            ",\"child_of\":" + (target.child_of ? std::to_string(*target.child_of) : "null") + "}";
        std::string& group = steps_of[shard];
        group += (group.empty() ? "[" : ",") + object;
        queue_of.emplace(shard, step.queue);
    }
    std::string id_literal = sql_literal(uuid_text(workflow_id)) + "::pg_catalog.uuid";
    const char* role = call([] { return GetUserNameFromId(RunAsOwner::caller(), false); });
    for (const auto& [shard, steps] : steps_of)
        call_in_group("_insert_steps", queue_of[shard],
                      id_literal + ", " + sql_literal(steps + "]") + "::pg_catalog.jsonb, " +
                          sql_literal(role) + "::pg_catalog.text");
}

pg_uuid_t submit_on_cluster(const core::WorkflowSpec& spec, const ClusterStepsTarget& target = {}) {
    require_schema_at_least("1.8", "wf_submit on a distributed pg_wf");
    require_cross_group_tables();
    std::set<std::string> queues;
    for (const core::StepSpec& step : spec.steps) queues.insert(step.queue);
    // Each queue once: on Citus a rights check is a statement.
    for (const std::string& queue : queues) require_right(Capability::produce, queue);
    // Rights first: a caller without them learns nothing of the key.
    if (spec.key)
        if (std::optional<pg_uuid_t> holder = lock_key_on_cluster(*spec.key)) return *holder;

    pg_uuid_t workflow_id = new_workflow_id.execute().uuid_at(0, "id");
    insert_steps_on_cluster(spec, workflow_id, target);
    std::string id_literal = sql_literal(uuid_text(workflow_id)) + "::pg_catalog.uuid";
    std::string key_literal = spec.key ? sql_literal(*spec.key) : std::string("NULL");
    run_through_citus("INSERT INTO wf.workflow (id, name, steps, key, child_of) VALUES (" + id_literal +
                      ", " + (spec.name ? sql_literal(*spec.name) : std::string("NULL")) + ", " +
                      std::to_string(spec.steps.size()) + ", " + key_literal + ", " +
                      (target.child_of ? std::to_string(*target.child_of) : std::string("NULL")) + ")");
    if (spec.key)
        run_through_citus("UPDATE wf.workflow_key SET workflow_id = " + id_literal +
                          " WHERE key = " + key_literal);
    return workflow_id;
}

// The running attempt of `token`, locked in its group (one statement that
// Citus sends to the group's node, in the caller's transaction); nothing
// for a stale token.
std::optional<RunningAttempt> lock_running_attempt_on_cluster(const FencingToken& token) {
    std::string queue = sql_literal(token.queue_name), id = std::to_string(token.id),
                attempt = std::to_string(token.attempt);
    Rows rows = run_through_citus(
        "SELECT j.cancel_requested, j.workflow_id, j.version, j.child_of"
        "  FROM wf.job j, wf.claim c"
        " WHERE j.queue = " + queue + " AND j.id = " + id + " AND j.attempt + 1 = " + attempt +
        "   AND j.status = 'pending' AND c.queue = " + queue + " AND c.id = " + id +
        "   AND c.attempt = " + attempt + " FOR NO KEY UPDATE OF j");
    if (rows.size() != 1) return std::nullopt;
    return running_attempt_of(rows);
}

// wf_complete through Citus, to the group of the token's queue.
bool complete_on_cluster(const FencingToken& token, std::optional<Datum> result) {
    std::string queue = sql_literal(token.queue_name);
    return run_through_citus("SELECT r FROM " + api_function("wf_complete") + "(" + queue + ", " + std::to_string(token.id) +
                             ", " + std::to_string(token.attempt) + ", " + jsonb_literal(result) +
                             ") AS r")
        .bool_at(0, "r");
}

// wf_start_child on a distributed pg_wf, in the caller's transaction as
// on one server: the parent step locked in its group, its child of that
// name found (wf.child is a reference table) or submitted across the
// groups with the parent's id on its steps, and recorded on every node.
// Its steps' ends reach the parent through the nodes' workers
// (children.hpp, worker/relay.cpp).
std::optional<pg_uuid_t> start_child_on_cluster(const FencingToken& token, std::string_view name,
                                                const core::WorkflowSpec& spec) {
    require_schema_at_least("1.9", "wf_start_child on a distributed pg_wf");
    require_cross_group_tables();
    // A child's outcome reaches its parent through wf._deliver_child, which
    // wf_distribute() hands to Citus (after the update to 1.9, again).
    if (!run_through_citus("SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_object"
                           " WHERE classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND objid ="
                           " 'wf._deliver_child(text, bigint, uuid, text, jsonb)'::pg_catalog.regprocedure"
                           " AND distribution_argument_index IS NOT NULL) AS d")
             .bool_at(0, "d"))
        throw core::Error("55000", "pg_wf's 1.9 functions are not distributed yet",
                          "ALTER EXTENSION pg_wf UPDATE added them; wf_distribute() hands them to Citus.",
                          "Run SELECT wf_distribute() on the coordinator.");
    std::optional<RunningAttempt> step = lock_running_attempt_on_cluster(token);
    if (!step || step->cancel_requested) return std::nullopt;
    std::string parent = "parent_queue = " + sql_literal(token.queue_name) +
                         " AND parent_id = " + std::to_string(token.id);
    Rows found = run_through_citus("SELECT workflow_id FROM wf.child WHERE " + parent +
                                   " AND name = " + sql_literal(name));
    if (!found.empty()) return found.uuid_at(0, "workflow_id");
    ClusterStepsTarget target;
    target.child_of = token.id;
    target.default_version = step->version;
    pg_uuid_t child = submit_on_cluster(spec, target);
    run_through_citus("INSERT INTO wf.child (parent_queue, parent_id, name, workflow_id) VALUES (" +
                      sql_literal(token.queue_name) + ", " + std::to_string(token.id) + ", " +
                      sql_literal(name) + ", " + sql_literal(uuid_text(child)) + "::pg_catalog.uuid)");
    return child;
}

// wf_complete_with_steps on a distributed pg_wf, in the caller's
// transaction as on one server: the step locked in its group, the
// workflow's row locked on every node (one transaction at a time adds
// steps to it), its steps read from every group, the new ones inserted in
// theirs, then the step completed in its group (wf_complete there).
bool complete_with_steps_on_cluster(const FencingToken& token, std::optional<Datum> result,
                                    Datum steps, bool no_steps) {
    require_schema_at_least("1.8", "wf_complete_with_steps on a distributed pg_wf");
    require_cross_group_tables();
    std::optional<RunningAttempt> step = lock_running_attempt_on_cluster(token);
    if (!step) return false;
    require_workflow_step(*step, token);
    // (The step is locked: its completion cannot find the token stale. One
    // whose cancellation was requested ends cancelled, and true is said, as
    // on one server.)
    if (step->cancel_requested || no_steps) {
        complete_on_cluster(token, result);
        return true;
    }

    std::string id_literal = sql_literal(uuid_text(*step->workflow_id)) + "::pg_catalog.uuid";
    run_through_citus("SELECT 1 FROM wf.workflow WHERE id = " + id_literal + " FOR UPDATE");
    Rows existing = run_through_citus(
        "SELECT coalesce(step_name, id::text) AS name, id, status, queue FROM wf.job"
        " WHERE workflow_id = " + id_literal + " ORDER BY id");
    ClusterStepsTarget target;
    target.default_version = step->version;
    // Steps added to a child workflow belong to the same parent.
    target.child_of = step->child_of;
    std::vector<std::string> names;
    std::map<std::string, bool> done;
    for (uint64 r = 0; r < existing.size(); r++) {
        std::string name = existing.text_at(r, "name");
        int64 id = existing.int64_at(r, "id");
        names.push_back(name);
        done[name] = id == token.id || existing.text_at(r, "status") == "done";
        if (done[name]) target.existing[name] = {id, existing.text_at(r, "queue")};
    }
    core::WorkflowSpec spec = parse_added_steps(steps, names, done, token);
    std::set<std::string> queues;
    for (const core::StepSpec& added : spec.steps) queues.insert(added.queue);
    for (const std::string& queue : queues) require_right(Capability::produce, queue);

    // The new steps first: when the completion ends the workflow's last
    // running step, they are there.
    insert_steps_on_cluster(spec, *step->workflow_id, target);
    run_through_citus("UPDATE wf.workflow SET steps = steps + " + std::to_string(spec.steps.size()) +
                      " WHERE id = " + id_literal);
    // The steps they run after are no longer final (their results are
    // inputs, not the workflow's result): flagged in each one's group.
    std::map<std::string, std::vector<int64>> flagged;
    for (const core::StepSpec& added : spec.steps)
        for (const std::string& parent : added.after_existing)
            flagged[target.existing.at(parent).queue].push_back(target.existing.at(parent).id);
    for (const auto& [queue, ids] : flagged)
        run_through_citus("UPDATE wf.job SET has_dependents = true WHERE queue = " + sql_literal(queue) +
                          " AND id = ANY (" + int8_array_literal(ids) + ") AND NOT has_dependents");
    complete_on_cluster(token, result);
    return true;
}

// wf_workflow on a distributed pg_wf: the same document, read through
// Citus (the summary from wf.workflows, the steps from wf.jobs), with each
// step's "after" named from the workflow's own steps.
PreparedStatement assemble_workflow(
    "WITH s AS (SELECT x.step::jsonb AS step, x.depends_on::bigint[] AS depends_on,"
    "                  x.children::jsonb AS children, x.n"
    "             FROM unnest($2::text[], $3::text[], $4::text[]) WITH ORDINALITY"
    "                  AS x(step, depends_on, children, n))"
    " SELECT $1::jsonb || jsonb_build_object('steps', (SELECT jsonb_agg(s.step || jsonb_build_object("
    "   'after', (SELECT jsonb_agg(coalesce((SELECT p.step ->> 'name' FROM s p"
    "                                         WHERE (p.step ->> 'id')::bigint = d), d::text) ORDER BY d)"
    "               FROM unnest(s.depends_on) AS d),"
    "   'children', s.children) ORDER BY s.n) FROM s)) AS described",
    {JSONBOID, TEXTARRAYOID, TEXTARRAYOID, TEXTARRAYOID});

Datum describe_on_cluster(Datum workflow_id) {
    char* id = call([&] { return DatumGetCString(DirectFunctionCall1(uuid_out, workflow_id)); });
    std::string lit = sql_literal(id) + "::pg_catalog.uuid";
    Rows summary = run_through_citus(
        "SELECT jsonb_build_object("
        "  'workflow_id', w.workflow_id, 'name', w.name, 'status', w.status,"
        "  'started_at', w.started_at, 'finished_at', w.finished_at,"
        "  'cancelled_at', w.cancelled_at, 'key', w.key, 'child_of', w.child_of,"
        "  'counts', jsonb_build_object('steps', w.steps, 'blocked', w.blocked,"
        "     'pending', w.pending, 'running', w.running, 'waiting', w.waiting, 'done', w.done,"
        "     'failed', w.failed, 'cancelled', w.cancelled))::text AS summary"
        "  FROM wf.workflows w WHERE w.workflow_id = " + lit);
    if (summary.size() != 1) no_such_workflow(workflow_id);
    std::string head = summary.text_at(0, "summary");
    Rows steps = run_through_citus(
        "SELECT jsonb_build_object("
        "  'name', j.step_name, 'id', j.id, 'queue', j.queue, 'status', j.status,"
        "  'attempt', j.attempt, 'max_attempts', j.max_attempts,"
        "  'run_at', j.run_at, 'created_at', j.created_at, 'started_at', j.started_at,"
        "  'finished_at', j.finished_at, 'last_error', j.last_error, 'result', j.result,"
        "  'waiting_for', j.waiting_for, 'events', j.events, 'worker', j.worker,"
        "  'version', j.version, 'progress', j.progress, 'children', NULL::jsonb)::text AS step,"
        "  j.depends_on::text AS depends_on, j.queue, j.id"
        "  FROM wf.jobs j WHERE j.workflow_id = " + lit + " ORDER BY j.id");
    // The child workflows each step started (wf.child, on every node).
    Rows children = run_through_citus(
        "SELECT c.parent_queue || ':' || c.parent_id AS step,"
        "       jsonb_agg(jsonb_build_object('name', c.name, 'workflow_id', c.workflow_id,"
        "                                    'status', coalesce(c.status, 'running'))"
        "                 ORDER BY c.started_at, c.name)::text AS children"
        "  FROM wf.child c WHERE (c.parent_queue, c.parent_id) IN"
        "       (SELECT queue, id FROM wf.job WHERE workflow_id = " + lit + ")"
        " GROUP BY c.parent_queue, c.parent_id");
    std::map<std::string, std::string> children_of;
    for (uint64 r = 0; r < children.size(); r++)
        children_of[children.text_at(r, "step")] = children.text_at(r, "children");
    std::vector<Datum> texts, parents, started;
    std::vector<bool> no_nulls(steps.size(), false), parents_null, started_null;
    for (uint64 r = 0; r < steps.size(); r++) {
        texts.push_back(text_datum(steps.text_at(r, "step")));
        parents_null.push_back(steps.is_null(r, "depends_on"));
        parents.push_back(steps.is_null(r, "depends_on") ? 0 : text_datum(steps.text_at(r, "depends_on")));
        auto found = children_of.find(steps.text_at(r, "queue") + ":" + std::to_string(steps.int64_at(r, "id")));
        started_null.push_back(found == children_of.end());
        started.push_back(found == children_of.end() ? 0 : text_datum(found->second));
    }
    Params<4> p;
    p.set(0, call([&] { return DirectFunctionCall1(jsonb_in, CStringGetDatum(head.c_str())); }));
    p.set(1, datum_array(texts, no_nulls, TEXTOID));
    p.set(2, datum_array(parents, parents_null, TEXTOID));
    p.set(3, datum_array(started, started_null, TEXTOID));
    Datum value = assemble_workflow.execute(p.values, p.nulls).datum(0, "described");
    return call([&] { return SPI_datumTransfer(value, false, -1); });
}


}  // namespace

int32 cancel_on_cluster(Datum workflow_id, bool by_worker) {
    char* id = call([&] { return DatumGetCString(DirectFunctionCall1(uuid_out, workflow_id)); });
    std::string lit = sql_literal(id) + "::pg_catalog.uuid";
    // One transaction at a time adds steps to a workflow, under its row
    // (wf_complete_with_steps): the cancel waits for one in flight. Its
    // steps then show in their groups as each node commits (a moment after
    // the lock is free, on some): the groups are looked at again, pass
    // after pass, until a pass (the second at the earliest) cancels nothing.
    run_through_citus("SELECT 1 FROM wf.workflow WHERE id = " + lit + " FOR UPDATE");
    // The worker's waits are bounded (BoundedLockWaits): Citus's detection
    // of distributed deadlocks does not see its transactions.
    const char* function = by_worker ? "_cancel_child" : "_cancel_workflow";
    int64 cancelled = 0;
    for (int pass = 0;; pass++) {
        int64 now_cancelled = 0;
        for (const std::string& queue :
             one_queue_per_group({"SELECT DISTINCT queue FROM wf.job WHERE workflow_id = " + lit}))
            now_cancelled += call_in_group(function, queue, lit);
        cancelled += now_cancelled;
        if (pass >= 1 && now_cancelled == 0) break;
    }
    run_through_citus("UPDATE wf.workflow SET cancelled_at = " +
                      timestamptz_literal(TimestampTzGetDatum(GetCurrentTransactionStartTimestamp())) +
                      " WHERE id = " + lit + " AND cancelled_at IS NULL");
    return static_cast<int32>(cancelled);
}

std::vector<std::string> workflow_step_queues(Datum workflow_id) {
    Params<1> p;
    p.set(0, workflow_id);
    if (distributed() && current_shard_group() == nullptr) {
        char* id = call([&] { return DatumGetCString(DirectFunctionCall1(uuid_out, workflow_id)); });
        Rows queues = run_through_citus("SELECT DISTINCT queue FROM wf.job WHERE workflow_id = " +
                                        sql_literal(id) + "::pg_catalog.uuid");
        std::vector<std::string> names;
        for (uint64 r = 0; r < queues.size(); r++) names.push_back(queues.text_at(r, "queue"));
        return names;
    }
    Rows queues = workflow_queues.execute_latest(p.values, p.nulls);
    std::vector<std::string> names;
    for (uint64 r = 0; r < queues.size(); r++) names.push_back(queues.text_at(r, "queue"));
    return names;
}

[[noreturn]] void no_such_workflow(Datum id) {
    char* text = call([&] { return DatumGetCString(DirectFunctionCall1(uuid_out, id)); });
    throw core::Error("42704", std::string("workflow ") + text + " does not exist",
                      {}, "Workflow ids are returned by wf_submit; wf.workflows lists them.");
}

}  // namespace wf::pg

using namespace wf;
using namespace wf::pg;

// wf_submit(spec jsonb) -> uuid
WF_SQL_FUNCTION(wf_submit) {
    core::WorkflowSpec spec = read_jsonb_spec(spec_arg(fcinfo, 0, "spec"));
    pg_uuid_t id = with_job_tables_anywhere([&] {
        if (distributed()) return submit_on_cluster(spec);
        return start_workflow(spec);
    });
    PG_RETURN_DATUM(uuid_result(id));
}

// wf_signal_with_start(spec jsonb, event text, payload jsonb) -> uuid: the
// workflow that holds the spec's key (started from the spec when none
// does), after the event is signalled, in one transaction.
WF_SQL_FUNCTION(wf_signal_with_start) {
    Datum spec_datum = spec_arg(fcinfo, 0, "spec");
    std::string_view event = text_arg(fcinfo, 1, "event");
    core::validate_event_name(event);
    if (!PG_ARGISNULL(2)) payload_arg(fcinfo, 2, "payload");
    core::WorkflowSpec spec = read_jsonb_spec(spec_datum);
    if (!spec.key)
        throw core::Error(core::sqlstate::invalid_parameter,
                          "wf_signal_with_start needs a workflow \"key\" in its spec",
                          "The key names the workflow to signal, or to start when none is active.",
                          "Add \"key\": \"<your id for it>\" at the top level of the spec.");
    pg_uuid_t id = with_job_tables_anywhere([&] {
        require_right(Capability::signal, event);
        if (distributed()) {
            pg_uuid_t started = submit_on_cluster(spec);
            signal_on_cluster(event, optional_arg(fcinfo, 2));
            return started;
        }
        pg_uuid_t started = start_workflow(spec);
        signal_event(PG_GETARG_DATUM(1), optional_arg(fcinfo, 2));
        return started;
    });
    PG_RETURN_DATUM(uuid_result(id));
}

// wf_start_child(queue, id, attempt, name, spec) -> uuid: the child
// workflow `name` of the running job (started now, or earlier by any
// attempt of it); NULL for a stale token or a job whose cancellation was
// requested.
WF_SQL_FUNCTION(wf_start_child) {
    FencingToken token = fencing_token_arg(fcinfo);
    std::string_view name = text_arg(fcinfo, 3, "name");
    core::validate_label(name, "name");
    core::WorkflowSpec spec = read_jsonb_spec(spec_arg(fcinfo, 4, "spec"));
    if (spec.key)
        throw core::Error(core::sqlstate::invalid_parameter,
                          "a child workflow cannot have a \"key\"",
                          "A child is named by its parent job and its name.",
                          "Remove \"key\" from the spec.");
    Datum name_datum = PG_GETARG_DATUM(3);

    std::optional<pg_uuid_t> id = with_job_tables_anywhere([&]() -> std::optional<pg_uuid_t> {
        require_right(Capability::work, token.queue_name);
        if (distributed()) return start_child_on_cluster(token, name, spec);
        std::optional<RunningAttempt> step = lock_running_attempt(token);
        if (!step || step->cancel_requested) return std::nullopt;
        StepsTarget target;
        target.child_of = token.id;
        target.default_version = step->version;
        Params<4> c;
        c.set(0, token.queue);
        c.set(1, Int64GetDatum(token.id));
        c.set(2, name_datum);
        Rows found = find_child.execute(c.values, c.nulls);
        if (!found.empty()) return found.uuid_at(0, "workflow_id");
        pg_uuid_t child = insert_steps(spec, target);
        c.set(3, UUIDPGetDatum(&child));
        record_child.execute(c.values, c.nulls);
        return child;
    });
    if (!id) PG_RETURN_NULL();
    PG_RETURN_DATUM(uuid_result(*id));
}

// wf_complete_with_steps(queue, id, attempt, result, steps) -> boolean:
// the step completes and its workflow gains `steps` (fan-out), in one
// transaction; false for a stale token. A step whose cancellation was
// requested ends cancelled and adds nothing.
WF_SQL_FUNCTION(wf_complete_with_steps) {
    FencingToken token = fencing_token_arg(fcinfo);
    if (!PG_ARGISNULL(3)) payload_arg(fcinfo, 3, "result");
    Datum steps = spec_arg(fcinfo, 4, "steps");
    int step_count = call([&] {
        Jsonb* array = DatumGetJsonbP(steps);
        return JB_ROOT_IS_ARRAY(array) && !JB_ROOT_IS_SCALAR(array) ? JB_ROOT_COUNT(array) : -1;
    });
    if (step_count < 0)
        throw core::Error(core::sqlstate::invalid_parameter, "steps must be a JSON array",
                          {}, "Pass the new steps as wf_submit's \"steps\": "
                              "'[{\"name\": \"a\", \"payload\": {}}]'.");

    bool completed = with_job_tables_anywhere([&] {
        require_right(Capability::work, token.queue_name);
        if (distributed()) return complete_with_steps_on_cluster(token, optional_arg(fcinfo, 3), steps, step_count == 0);
        std::optional<RunningAttempt> step = lock_running_attempt(token);
        if (!step) return false;
        require_workflow_step(*step, token);
        StepsTarget target;
        target.workflow_id = UUIDPGetDatum(&*step->workflow_id);
        target.default_version = step->version;
        // Steps added to a child workflow belong to the same parent.
        target.child_of = step->child_of;
        if (step->cancel_requested || step_count == 0) {
            complete_job(token, optional_arg(fcinfo, 3));
            return true;
        }

        // One transaction at a time adds steps to a workflow; then its
        // steps, latest, with this one as done as it is about to be.
        Params<1> w;
        w.set(0, *target.workflow_id);
        lock_workflow_row.execute(w.values, w.nulls);
        Rows existing = workflow_steps.execute_latest(w.values, w.nulls);
        std::vector<std::string> names;
        std::map<std::string, bool> done;
        for (uint64 r = 0; r < existing.size(); r++) {
            std::string name = existing.text_at(r, "name");
            int64 id = existing.int64_at(r, "id");
            names.push_back(name);
            target.existing[name] = id;
            done[name] = id == token.id || existing.text_at(r, "status") == "done";
        }
        core::WorkflowSpec spec = parse_added_steps(steps, names, done, token);
        std::vector<int64> outer_parents;
        for (const core::StepSpec& added : spec.steps)
            for (const std::string& parent : added.after_existing)
                outer_parents.push_back(target.existing[parent]);

        // The new steps first: when the completion ends the workflow's last
        // running step, they are there (a child workflow is not over).
        insert_steps(spec, target);
        if (!outer_parents.empty()) {
            Params<1> f;
            f.set(0, int8_array(outer_parents));
            flag_parents.execute(f.values, f.nulls);
        }
        complete_job(token, optional_arg(fcinfo, 3));
        return true;
    });
    PG_RETURN_BOOL(completed);
}

// wf_workflow(workflow_id uuid) -> jsonb: the workflow and every step.
// Reading it takes any right on every step's queue, as the views' rows do.
WF_SQL_FUNCTION(wf_workflow) {
    Datum id = uuid_arg(fcinfo, 0, "workflow_id");
    Datum result = with_job_tables_anywhere([&] {
        for (const std::string& queue : workflow_step_queues(id))
            if (!has_right(RunAsOwner::caller(), std::nullopt, queue))
                require_right(Capability::observe, queue);
        if (distributed()) return describe_on_cluster(id);
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
    int32 cancelled = with_job_tables_anywhere([&] {
        if (distributed()) {
            require_schema_at_least("1.8", "wf_cancel_workflow on a distributed pg_wf");
            std::vector<std::string> queues = workflow_step_queues(id);
            if (queues.empty()) no_such_workflow(id);
            for (const std::string& queue : queues) require_right(Capability::operate, queue);
            return cancel_on_cluster(id);
        }
        Params<1> p;
        p.set(0, id);
        if (workflow_exists.execute(p.values, p.nulls).empty()) no_such_workflow(id);
        require_right_on_steps(id, Capability::operate);
        return cancel_workflow_steps(id);
    });
    PG_RETURN_INT32(cancelled);
}

// wf._insert_steps(queue, workflow_id, steps, role) -> int: one shard
// group's steps of a workflow wf_submit makes on a distributed pg_wf.
WF_SQL_FUNCTION(wf_group_insert_steps) {
    require_group_call_from_pg_wf("wf._insert_steps");
    queue_arg(fcinfo, 0);
    Datum workflow_id = uuid_arg(fcinfo, 1, "workflow_id");
    core::require_not_null(PG_ARGISNULL(2), "steps");
    std::string role(text_arg(fcinfo, 3, "role"));
    int64 inserted = with_queue_tables(PG_GETARG_DATUM(0), [&] {
        Params<2> p;
        p.set(0, workflow_id);
        p.set(1, PG_GETARG_DATUM(2));
        // Steps of an ordered queue need a key, and lock it (flow_control.hpp).
        Rows ordered = group_step_keys.execute(&p.values[1], &p.nulls[1]);
        std::map<std::string, std::vector<std::string>> keys;
        for (uint64 r = 0; r < ordered.size(); r++) {
            std::string queue = ordered.text_at(r, "queue");
            if (!queue_settings(text_datum(queue)).flow.ordered) continue;
            if (ordered.is_null(r, "key"))
                throw core::Error(core::sqlstate::invalid_parameter,
                                  "step \"" + ordered.text_at(r, "step_name") + "\" is in ordered queue \"" +
                                      queue + "\": it needs a \"key\"",
                                  "An ordered queue runs the jobs of each key one at a time, in "
                                  "enqueue order.");
            keys[queue].push_back(ordered.text_at(r, "key"));
        }
        for (auto& [queue, queue_keys] : keys) lock_keys_for_enqueue(queue, queue_keys);
        Rows done = insert_group_steps.execute(p.values, p.nulls);
        note_ready_queues(done.datum(0, "ready_queues"));
        for (uint64 r = 0; r < ordered.size(); r++) count(ordered.text_at(r, "queue"), Metric::enqueued);
        Params<2> o;
        o.set(0, PG_GETARG_DATUM(2));
        o.set(1, text_datum(role));
        if (!subscribe_group_steps.execute(o.values, o.nulls).empty()) note_releases_deferred();
        return static_cast<int64>(ordered.size());
    });
    PG_RETURN_INT32(static_cast<int32>(inserted));
}

// wf._deliver_child(queue, parent_id, workflow_id, name, outcome) -> int:
// on a distributed pg_wf, a child workflow's outcome delivered to its
// parent job in the parent's shard group (called by the relay, which marks
// it delivered in the same transaction); 0 when the parent is gone.
WF_SQL_FUNCTION(wf_group_deliver_child) {
    require_group_call_from_pg_wf("wf._deliver_child");
    BoundedLockWaits bounded;
    queue_arg(fcinfo, 0);
    int64 parent = int64_arg(fcinfo, 1, "parent_id");
    Datum workflow_id = uuid_arg(fcinfo, 2, "workflow_id");
    text_arg(fcinfo, 3, "name");
    core::require_not_null(PG_ARGISNULL(4), "outcome");
    int64 delivered = with_queue_tables(PG_GETARG_DATUM(0), [&] {
        return deliver_child_outcome(PG_GETARG_DATUM(0), parent, workflow_id, PG_GETARG_DATUM(3),
                                     PG_GETARG_DATUM(4));
    });
    PG_RETURN_INT32(static_cast<int32>(delivered));
}

// wf._cancel_workflow(queue, workflow_id) -> int: wf_cancel_workflow in
// one shard group, on a distributed pg_wf.
WF_SQL_FUNCTION(wf_group_cancel_workflow) {
    require_group_call_from_pg_wf("wf._cancel_workflow");
    queue_arg(fcinfo, 0);
    Datum workflow_id = uuid_arg(fcinfo, 1, "workflow_id");
    int32 cancelled = with_queue_tables(PG_GETARG_DATUM(0), [&] {
        return cancel_workflow_steps(workflow_id, false);
    });
    PG_RETURN_INT32(cancelled);
}

// wf._cancel_child(queue, workflow_id) -> int: wf._cancel_workflow for the
// node's worker (a cancelled parent's child), its lock waits bounded.
WF_SQL_FUNCTION(wf_group_cancel_child) {
    require_group_call_from_pg_wf("wf._cancel_child");
    BoundedLockWaits bounded;
    queue_arg(fcinfo, 0);
    Datum workflow_id = uuid_arg(fcinfo, 1, "workflow_id");
    int32 cancelled = with_queue_tables(PG_GETARG_DATUM(0), [&] {
        return cancel_workflow_steps(workflow_id, false);
    });
    PG_RETURN_INT32(cancelled);
}
