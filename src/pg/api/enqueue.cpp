// wf_enqueue and wf_enqueue_batch: new jobs, in the caller's transaction.
#include "core/error.hpp"
#include "core/validation.hpp"
#include "pg/api/frame.hpp"
#include "pg/citus/cluster_calls.hpp"
#include "pg/jobs/remote_dependencies.hpp"
#include "pg/jobs/dependencies.hpp"
#include "pg/api/queue_settings.hpp"

namespace wf::pg {
namespace {

// The dependency ids of a wf_enqueue call, without NULLs or duplicates.
std::vector<int64> read_dependencies(FunctionCallInfo fcinfo, int n) {
    std::vector<int64> ids;
    if (PG_ARGISNULL(n)) return ids;
    Datum d = PG_GETARG_DATUM(n);
    ArrayType* array = call([&] { return DatumGetArrayTypeP(d); });
    int count = 0;
    Datum* elements = nullptr;
    bool* nulls = nullptr;
    call([&] { deconstruct_array(array, INT8OID, 8, true, 'd', &elements, &nulls, &count); });
    core::validate_dependency_count(static_cast<size_t>(count));
    for (int i = 0; i < count; i++) {
        if (nulls[i])
            throw core::Error(core::sqlstate::null_not_allowed,
                              "depends_on must not contain null");
        ids.push_back(DatumGetInt64(elements[i]));
    }
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    return ids;
}

// The jobs of an ordered queue run in line per key: one without a key has
// no line to join (22023).
[[noreturn]] void refuse_job_without_key(std::string_view queue, const char* hint) {
    throw core::Error(core::sqlstate::invalid_parameter,
                      "queue \"" + std::string(queue) + "\" is ordered: a job needs a key",
                      "An ordered queue runs the jobs of each key one at a time, in enqueue order.",
                      hint);
}

}  // namespace
}  // namespace wf::pg

using namespace wf;
using namespace wf::pg;

// wf_enqueue(queue, payload, run_at, priority, max_attempts, idempotency_key,
//            workflow_id, step_name, depends_on, key, dedup_key, on_duplicate,
//            max_run_time, start_by, version) -> bigint
WF_SQL_FUNCTION(wf_enqueue) {
    require_arguments(fcinfo, 15);
    std::string_view queue = queue_arg(fcinfo, 0);
    Datum payload = payload_arg(fcinfo, 1, "payload");
    int32 priority = int32_arg(fcinfo, 3, "priority");
    if (!PG_ARGISNULL(4)) core::validate_max_attempts(PG_GETARG_INT32(4));
    if (!PG_ARGISNULL(5)) core::validate_idempotency_key(text_arg(fcinfo, 5, "idempotency_key"));
    if (!PG_ARGISNULL(7)) core::validate_label(text_arg(fcinfo, 7, "step_name"), "step_name");
    if (!PG_ARGISNULL(2) && TIMESTAMP_NOT_FINITE(PG_GETARG_TIMESTAMPTZ(2)))
        throw core::Error(core::sqlstate::invalid_parameter, "run_at must be a finite time",
                          {}, "Pass NULL to run the job as soon as possible.");
    std::vector<int64> dependencies = read_dependencies(fcinfo, 8);
    if (!PG_ARGISNULL(9)) core::validate_label(text_arg(fcinfo, 9, "key"), "key");
    if (!PG_ARGISNULL(10)) core::validate_label(text_arg(fcinfo, 10, "dedup_key"), "dedup_key");
    if (!PG_ARGISNULL(14)) core::validate_label(text_arg(fcinfo, 14, "version"), "version");
    core::OnDuplicate on_duplicate = PG_ARGISNULL(11)
                                         ? core::OnDuplicate::keep
                                         : core::parse_on_duplicate(text_arg(fcinfo, 11, "on_duplicate"));
    if (on_duplicate != core::OnDuplicate::keep && PG_ARGISNULL(10))
        throw core::Error(core::sqlstate::invalid_parameter, "on_duplicate needs a dedup_key",
                          {}, "Pass dedup_key: the key whose active job a duplicate replaces.");
    if (!PG_ARGISNULL(12)) interval_arg(fcinfo, 12, "max_run_time", false);
    if (!PG_ARGISNULL(13)) {
        TimestampTz start_by = PG_GETARG_TIMESTAMPTZ(13);
        TimestampTz earliest = PG_ARGISNULL(2) ? GetCurrentTransactionStartTimestamp()
                                               : PG_GETARG_TIMESTAMPTZ(2);
        if (TIMESTAMP_NOT_FINITE(start_by) || start_by < earliest)
            throw core::Error(core::sqlstate::invalid_parameter,
                              "start_by must be a finite time, not before the job may run",
                              {}, "A job not started by start_by fails; it may start at run_at "
                                  "(now, when NULL).");
    }

    NewJob job;
    job.queue = PG_GETARG_DATUM(0);
    job.payload = payload;
    job.run_at = optional_arg(fcinfo, 2);
    job.priority = priority;
    job.idempotency_key = optional_arg(fcinfo, 5);
    job.workflow_id = optional_arg(fcinfo, 6);
    job.step_name = optional_arg(fcinfo, 7);
    job.depends_on = dependencies;
    job.key = optional_arg(fcinfo, 9);
    job.dedup_key = optional_arg(fcinfo, 10);
    job.max_run_time = optional_arg(fcinfo, 12);
    job.start_by = optional_arg(fcinfo, 13);
    job.version = optional_arg(fcinfo, 14);

    int64 id = with_queue_tables(PG_GETARG_DATUM(0), [&] {
        require_right(Capability::produce, queue);
        QueueSettings settings = queue_settings(job.queue);
        if (!job.version && settings.version) job.version = text_datum(*settings.version);
        job.key_order = settings.flow.by_key();
        if (settings.flow.ordered && !job.key)
            refuse_job_without_key(queue, "Pass key => the group this job runs in order with.");
        // First of what may wait: a child workflow still being created.
        std::optional<int64> child_of;
        if (job.workflow_id) child_of = child_workflow_parent(*job.workflow_id);
        if (settings.flow.ordered)
            lock_keys_for_enqueue(queue, {std::string(text_arg(fcinfo, 9, "key"))});
        // A dedup key: an active job that holds it is the answer (and,
        // with on_duplicate => 'replace', takes the new payload and run_at
        // while it waits in line); otherwise the new job holds it.
        if (job.dedup_key) {
            if (std::optional<int64> holder = lock_dedup_key(job.queue, *job.dedup_key)) {
                if (on_duplicate == core::OnDuplicate::keep) return *holder;
                if (replace_ready_job(job.queue, *holder, payload, job.run_at)) return *holder;
                // It started: the new job is a new one, and holds the key.
            }
        }
        DependencyState deps;
        if (!job.depends_on.empty()) deps = lock_dependencies(job.depends_on);
        // A job that waits on others reads their results: the right to
        // produce in their queues too.
        for (const std::string& parent_queue : deps.queues)
            require_right(Capability::produce, parent_queue);
        // Dependencies in other shard groups (a distributed pg_wf) count
        // as unfinished until the worker has asked them.
        int32 remote = static_cast<int32>(deps.remote.size());
        if (deps.failed) {
            job.status = "cancelled";
            job.last_error = "dependency job " + std::to_string(deps.failed) +
                             (deps.failed_was_cancelled ? " was cancelled" : " failed");
            job.cancelled_by = deps.failed;
            // It counts all of them, as wf_retry would recount them.
            job.pending_deps = static_cast<int32>(deps.not_done.size()) + remote;
        } else if (!deps.unfinished.empty() || remote > 0) {
            job.status = "blocked";
            job.pending_deps = static_cast<int32>(deps.unfinished.size()) + remote;
        }
        job.max_attempts = PG_ARGISNULL(4) ? settings.max_attempts : PG_GETARG_INT32(4);
        if (std::optional<int64> id = insert_job(job, child_of)) {
            add_dependency_edges(deps.not_done, job.queue, *id);
            add_dependency_edges(deps.remote, job.queue, *id);
            if (!deps.failed)
                note_subscription(job.queue, *id, deps.remote,
                                  call([] { return GetUserNameFromId(RunAsOwner::caller(), false); }));
            if (job.dedup_key) hold_dedup_key(job.queue, *job.dedup_key, *id);
            return *id;
        }
        // The key is taken (ON CONFLICT waited for a racing insert to commit).
        std::optional<KeyHolder> holder = find_job_by_key(job.queue, *job.idempotency_key, payload);
        if (!holder)
            throw core::Error("40001", "idempotency key was released while enqueuing",
                              {}, "Retry the transaction.");
        if (!holder->same_payload) {
            std::string key(text_arg(fcinfo, 5, "idempotency_key"));
            throw core::Error(core::sqlstate::unique_violation,
                              "idempotency key \"" + key + "\" is already used in queue \"" +
                                  std::string(queue) + "\" with a different payload",
                              "Job " + std::to_string(holder->id) + " holds that key.",
                              "Use a new key for a different payload.");
        }
        return holder->id;
    });
    PG_RETURN_INT64(id);
}

// wf_enqueue_batch(queue, payloads jsonb array, keys text[]) -> SETOF bigint,
// in order
WF_SQL_FUNCTION(wf_enqueue_batch) {
    require_arguments(fcinfo, 3);
    std::string_view queue = queue_arg(fcinfo, 0);
    core::require_not_null(PG_ARGISNULL(1), "payloads");
    Jsonb* payloads = call([&] { return PG_GETARG_JSONB_P(1); });
    if (!JB_ROOT_IS_ARRAY(payloads) || JB_ROOT_IS_SCALAR(payloads))
        throw core::Error(core::sqlstate::invalid_parameter, "payloads must be a JSON array",
                          {}, "Pass one array element per job, e.g. '[{\"n\":1},{\"n\":2}]'.");
    core::validate_batch_length(JB_ROOT_COUNT(payloads));
    // Each element is one job's payload and obeys the same limit as wf_enqueue.
    call([&] {
        JsonbIterator* it = JsonbIteratorInit(&payloads->root);
        JsonbValue v;
        JsonbIteratorToken token;
        while ((token = JsonbIteratorNext(&it, &v, true)) != WJB_DONE) {
            if (token != WJB_ELEM) continue;
            int bytes = v.type == jbvBinary   ? v.val.binary.len
                        : v.type == jbvString ? v.val.string.len
                                              : 0;  // numbers, booleans, null: small
            if (bytes > max_payload_size)
                ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
                                errmsg("payload in batch is too large"),
                                errdetail("An element has %d bytes; the limit is %d.",
                                          bytes, max_payload_size),
                                errhint("Raise wf.max_payload_size, or store large data "
                                        "elsewhere and pass a reference.")));
        }
    });

    // One key (or NULL) per payload.
    std::optional<Datum> keys = optional_arg(fcinfo, 2);
    bool every_job_has_a_key = keys.has_value();
    std::vector<std::string> key_texts;
    if (keys) {
        ArrayType* array = call([&] { return DatumGetArrayTypeP(*keys); });
        int count = 0;
        Datum* elements = nullptr;
        bool* nulls = nullptr;
        call([&] { deconstruct_array(array, TEXTOID, -1, false, 'i', &elements, &nulls, &count); });
        if (ARR_NDIM(array) > 1 || count != static_cast<int>(JB_ROOT_COUNT(payloads)))
            throw core::Error(core::sqlstate::invalid_parameter,
                              "keys must have one element per payload",
                              "There are " + std::to_string(JB_ROOT_COUNT(payloads)) +
                                  " payloads and " + std::to_string(count) + " keys.");
        for (int i = 0; i < count; i++) {
            if (nulls[i]) {
                every_job_has_a_key = false;
                continue;
            }
            text* t = call([&] { return DatumGetTextPP(elements[i]); });
            key_texts.emplace_back(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
            core::validate_label(key_texts.back(), "key");
        }
        *keys = PointerGetDatum(array);
    }

    Datum queue_datum = PG_GETARG_DATUM(0);
    std::vector<int64> ids = with_queue_tables(PG_GETARG_DATUM(0), [&] {
        require_right(Capability::produce, queue);
        QueueSettings settings = queue_settings(queue_datum);
        if (settings.flow.ordered && !every_job_has_a_key && JB_ROOT_COUNT(payloads) > 0)
            refuse_job_without_key(queue, "Pass keys => one key per payload.");
        if (settings.flow.ordered) lock_keys_for_enqueue(queue, key_texts);
        std::optional<Datum> version;
        if (settings.version) version = text_datum(*settings.version);
        return insert_pending_jobs(queue_datum, PointerGetDatum(payloads), settings.max_attempts,
                                   keys, version, settings.flow.by_key());
    });
    return_ids(fcinfo, ids);
    return 0;
}

// ---- dependencies between shard groups (remote_dependencies.hpp) ----

// wf._subscribe(queue, parent_id, child_queue, child_id) -> text: in the
// parent's group, on a distributed pg_wf (called by the relay).
WF_SQL_FUNCTION(wf_group_subscribe) {
    require_group_call_from_pg_wf("wf._subscribe");
    BoundedLockWaits bounded;
    queue_arg(fcinfo, 0);
    int64 parent = int64_arg(fcinfo, 1, "parent_id");
    queue_arg(fcinfo, 2);
    int64 child = int64_arg(fcinfo, 3, "child_id");
    std::string status = with_queue_tables(PG_GETARG_DATUM(0), [&] {
        return subscribe_to_parent(PG_GETARG_DATUM(0), parent, PG_GETARG_DATUM(2), child);
    });
    PG_RETURN_DATUM(text_datum(status));
}

// wf._parent_ended(queue, parent_id, status, result, name, children) -> int:
// in the children's group, on a distributed pg_wf (called by the relay).
WF_SQL_FUNCTION(wf_group_parent_ended) {
    require_group_call_from_pg_wf("wf._parent_ended");
    BoundedLockWaits bounded;
    queue_arg(fcinfo, 0);
    int64 parent = int64_arg(fcinfo, 1, "parent_id");
    std::string status(text_arg(fcinfo, 2, "status"));
    if (status != "done" && status != "failed" && status != "cancelled" && status != "missing" &&
        status != "forbidden")
        throw core::Error(core::sqlstate::invalid_parameter, "status \"" + status + "\" is not an end");
    text_arg(fcinfo, 4, "name");
    core::require_not_null(PG_ARGISNULL(5), "children");
    Datum children_datum = PG_GETARG_DATUM(5);
    ArrayType* array = call([&] { return DatumGetArrayTypeP(children_datum); });
    int count = 0;
    Datum* elements = nullptr;
    bool* nulls = nullptr;
    call([&] { deconstruct_array(array, INT8OID, 8, FLOAT8PASSBYVAL, 'd', &elements, &nulls, &count); });
    std::vector<int64> children;
    for (int i = 0; i < count; i++)
        if (!nulls[i]) children.push_back(DatumGetInt64(elements[i]));
    int64 changed = with_queue_tables(PG_GETARG_DATUM(0), [&] {
        return deliver_parent_end(parent, status, optional_arg(fcinfo, 3), PG_GETARG_DATUM(4), children);
    });
    PG_RETURN_INT32(static_cast<int32>(changed));
}

// wf._take_dependents(queue, parent_id) -> jsonb: in the parent's group, on
// a distributed pg_wf (called by the relay); NULL while it has not ended.
WF_SQL_FUNCTION(wf_group_take_dependents) {
    require_group_call_from_pg_wf("wf._take_dependents");
    BoundedLockWaits bounded;
    queue_arg(fcinfo, 0);
    int64 parent = int64_arg(fcinfo, 1, "parent_id");
    std::optional<Datum> taken = with_queue_tables(PG_GETARG_DATUM(0), [&] {
        return take_dependents(PG_GETARG_DATUM(0), parent);
    });
    if (!taken) PG_RETURN_NULL();
    PG_RETURN_DATUM(*taken);
}
