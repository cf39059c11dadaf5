// wf_enqueue and wf_enqueue_batch: new jobs, in the caller's transaction.
#include "core/error.hpp"
#include "core/validation.hpp"
#include "pg/base/args.hpp"
#include "pg/jobs/job_state.hpp"
#include "pg/jobs/queue_settings.hpp"
#include "pg/runtime/wakeup.hpp"

namespace wf::pg {
namespace {

// Locks the dependencies (in id order: two enqueuers never deadlock), so a
// dependency cannot finish between this read and the commit of the edges
// below: its wf_complete waits, then re-reads the row.
PreparedStatement lock_dependencies(
    "SELECT id, status FROM wf.job WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE",
    {INT8ARRAYOID});

// wf_complete looks for dependents only when this flag says there are some.
// It reads the flag from the row version its UPDATE wrote, so a completion
// that waited on the lock above sees the flag set here.
PreparedStatement flag_dependencies(
    "UPDATE wf.job SET has_dependents = true"
    " WHERE id = ANY($1) AND NOT has_dependents AND status <> 'done'",
    {INT8ARRAYOID});

// A pending job also gets its row in the ready set, in the same statement.
// $6 is the job's max_attempts (its own, else the queue's). Without an
// idempotency key the inserts are plain: ON CONFLICT would make each a
// speculative insertion, with an index check and a WAL record more.
#define WF_INSERT_JOB_SQL(ON_KEY_CONFLICT, ON_READY_CONFLICT) \
    "WITH job AS (" \
    " INSERT INTO wf.job (queue, status, payload, run_at, priority, max_attempts," \
    "                    attempt_budget, idempotency_key, workflow_id, step_name," \
    "                    depends_on, pending_deps, last_error, cancelled_by, finished_at)" \
    " VALUES ($1, $2, $3, coalesce($4, now()), $5, $6, $6, $7, $8, $9, $10, $11, $12, $13," \
    "         CASE WHEN $2 = 'cancelled' THEN now() END)" \
    ON_KEY_CONFLICT \
    " RETURNING queue, priority, run_at, id, status)," \
    " ready AS (INSERT INTO wf.ready (queue, priority, run_at, id)" \
    "           SELECT queue, priority, run_at, id FROM job WHERE status = 'pending'" \
    ON_READY_CONFLICT ")" \
    " SELECT id FROM job"

PreparedStatement insert_job(
    WF_INSERT_JOB_SQL(" ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL"
                      " DO NOTHING",
                      " ON CONFLICT DO NOTHING"),
    {TEXTOID, TEXTOID, JSONBOID, TIMESTAMPTZOID, INT4OID, INT4OID, TEXTOID, UUIDOID, TEXTOID,
     INT8ARRAYOID, INT4OID, TEXTOID, INT8OID});

// A new id cannot conflict in the ready set either.
PreparedStatement insert_job_without_key(
    WF_INSERT_JOB_SQL("", ""),
    {TEXTOID, TEXTOID, JSONBOID, TIMESTAMPTZOID, INT4OID, INT4OID, TEXTOID, UUIDOID, TEXTOID,
     INT8ARRAYOID, INT4OID, TEXTOID, INT8OID});

PreparedStatement find_by_key(
    "SELECT id, payload = $3 FROM wf.job WHERE queue = $1 AND idempotency_key = $2",
    {TEXTOID, TEXTOID, JSONBOID});

PreparedStatement insert_edges(
    "INSERT INTO wf.dependency (parent_id, child_queue, child_id)"
    " SELECT unnest($1::bigint[]), $2, $3 ON CONFLICT DO NOTHING",
    {INT8ARRAYOID, TEXTOID, INT8OID});

PreparedStatement insert_batch(
    "WITH job AS ("
    " INSERT INTO wf.job (queue, status, payload, max_attempts, attempt_budget)"
    " SELECT $1, 'pending', e.value, $3, $3"
    "   FROM jsonb_array_elements($2) WITH ORDINALITY AS e(value, n)"
    "  ORDER BY e.n"
    " RETURNING queue, priority, run_at, id),"
    " ready AS (INSERT INTO wf.ready (queue, priority, run_at, id)"
    "           SELECT queue, priority, run_at, id FROM job)"
    " SELECT id FROM job",
    {TEXTOID, JSONBOID, INT4OID});

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

struct DependencyState {
    std::vector<int64> unfinished;  // not done yet: the new job waits on these
    int64 failed = 0;               // a failed or cancelled one, if any
    // Edges go to every dependency not done, failed ones included: a
    // wf_retry of a failed one must find and release this job later.
    std::vector<int64> not_done;
};

DependencyState check_dependencies(const std::vector<int64>& ids) {
    DependencyState state;
    Params<1> p;
    p.set(0, int8_array(ids));
    uint64 rows = lock_dependencies.execute(p.values, p.nulls);
    std::vector<int64> found;
    for (uint64 r = 0; r < rows; r++) {
        int64 id = column_int64(r, 1);
        std::string status = column_text(r, 2);
        found.push_back(id);
        if (status == "done") continue;
        state.not_done.push_back(id);
        if (status == "failed" || status == "cancelled") {
            if (state.failed == 0) state.failed = id;
        } else {
            state.unfinished.push_back(id);
        }
    }
    for (int64 id : ids)
        if (!std::binary_search(found.begin(), found.end(), id))
            throw core::Error(core::sqlstate::foreign_key_violation,
                              "dependency job " + std::to_string(id) + " does not exist",
                              "depends_on names job ids returned by wf_enqueue.");
    if (!state.not_done.empty()) {
        p.set(0, int8_array(state.not_done));
        flag_dependencies.execute(p.values, p.nulls);
    }
    return state;
}

}  // namespace
}  // namespace wf::pg

using namespace wf;
using namespace wf::pg;

// wf_enqueue(queue, payload, run_at, priority, max_attempts, idempotency_key,
//            workflow_id, step_name, depends_on) -> bigint
WF_SQL_FUNCTION(wf_enqueue) {
    std::string_view queue = queue_arg(fcinfo, 0);
    Datum payload = payload_arg(fcinfo, 1, "payload");
    int32 priority = int32_arg(fcinfo, 3, "priority");
    if (!PG_ARGISNULL(4)) core::validate_positive(PG_GETARG_INT32(4), "max_attempts");
    if (!PG_ARGISNULL(5)) core::validate_idempotency_key(text_arg(fcinfo, 5, "idempotency_key"));
    if (!PG_ARGISNULL(7)) core::validate_label(text_arg(fcinfo, 7, "step_name"), "step_name");
    if (!PG_ARGISNULL(2) && TIMESTAMP_NOT_FINITE(PG_GETARG_TIMESTAMPTZ(2)))
        throw core::Error(core::sqlstate::invalid_parameter, "run_at must be a finite time",
                          {}, "Pass NULL to run the job as soon as possible.");
    std::vector<int64> dependencies = read_dependencies(fcinfo, 8);

    SpiConnection spi;
    DependencyState deps;
    if (!dependencies.empty()) deps = check_dependencies(dependencies);

    const char* status = deps.failed ? "cancelled" : deps.unfinished.empty() ? "pending" : "blocked";
    std::string why;
    if (deps.failed) why = "dependency job " + std::to_string(deps.failed) + " failed";

    Params<13> p;
    p.set(0, PG_GETARG_DATUM(0));
    p.set(1, call([&] { return CStringGetTextDatum(status); }));
    p.set(2, payload);
    if (PG_ARGISNULL(2)) p.set_null(3); else p.set(3, PG_GETARG_DATUM(2));
    p.set(4, Int32GetDatum(priority));
    p.set(5, PG_ARGISNULL(4) ? Int32GetDatum(queue_settings(PG_GETARG_DATUM(0)).max_attempts)
                             : PG_GETARG_DATUM(4));
    if (PG_ARGISNULL(5)) p.set_null(6); else p.set(6, PG_GETARG_DATUM(5));
    if (PG_ARGISNULL(6)) p.set_null(7); else p.set(7, PG_GETARG_DATUM(6));
    if (PG_ARGISNULL(7)) p.set_null(8); else p.set(8, PG_GETARG_DATUM(7));
    if (dependencies.empty()) p.set_null(9); else p.set(9, int8_array(dependencies));
    // A job cancelled by a failed dependency counts all of them, as wf_retry
    // would recount them.
    p.set(10, Int32GetDatum(static_cast<int32>(deps.failed ? deps.not_done.size()
                                                            : deps.unfinished.size())));
    if (why.empty()) p.set_null(11); else p.set(11, call([&] { return CStringGetTextDatum(why.c_str()); }));
    if (deps.failed) p.set(12, Int64GetDatum(deps.failed)); else p.set_null(12);

    int64 id = 0;
    PreparedStatement& insert = PG_ARGISNULL(5) ? insert_job_without_key : insert_job;
    if (insert.execute(p.values, p.nulls) == 1) {
        id = column_int64(0, 1);
        if (!deps.not_done.empty()) {
            Params<3> e;
            e.set(0, int8_array(deps.not_done));
            e.set(1, PG_GETARG_DATUM(0));
            e.set(2, Int64GetDatum(id));
            insert_edges.execute(e.values, e.nulls);
        }
        if (std::strcmp(status, "pending") == 0) note_queue_ready(queue.data(), queue.size());
    } else {
        // The key is taken (ON CONFLICT waited for a racing insert to commit).
        Params<3> k;
        k.set(0, PG_GETARG_DATUM(0));
        k.set(1, PG_GETARG_DATUM(5));
        k.set(2, payload);
        if (find_by_key.execute(k.values, k.nulls) != 1)
            throw core::Error("40001", "idempotency key was released while enqueuing",
                              {}, "Retry the transaction.");
        id = column_int64(0, 1);
        if (!column_bool(0, 2)) {
            std::string key(text_arg(fcinfo, 5, "idempotency_key"));
            throw core::Error(core::sqlstate::unique_violation,
                              "idempotency key \"" + key + "\" is already used in queue \"" +
                                  std::string(queue) + "\" with a different payload",
                              "Job " + std::to_string(id) + " holds that key.",
                              "Use a new key for a different payload.");
        }
    }
    spi.finish();
    PG_RETURN_INT64(id);
}

// wf_enqueue_batch(queue, payloads jsonb array) -> SETOF bigint, in order
WF_SQL_FUNCTION(wf_enqueue_batch) {
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

    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    call([&] { InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC); });

    SpiConnection spi;
    Params<3> p;
    p.set(0, PG_GETARG_DATUM(0));
    p.set(1, PointerGetDatum(payloads));
    p.set(2, Int32GetDatum(queue_settings(PG_GETARG_DATUM(0)).max_attempts));
    uint64 rows = insert_batch.execute(p.values, p.nulls);
    std::vector<int64> ids;
    ids.reserve(rows);
    for (uint64 r = 0; r < rows; r++) ids.push_back(column_int64(r, 1));
    // Ids come from one sequence in insertion order: sorted is input order.
    std::sort(ids.begin(), ids.end());
    for (int64 id : ids) {
        Datum value = Int64GetDatum(id);
        bool isnull = false;
        call([&] { tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, &value, &isnull); });
    }
    if (rows > 0) note_queue_ready(queue.data(), queue.size());
    spi.finish();
    return 0;
}
