// wf_wait_job and wf_wait_workflow: the code that enqueued a job or
// submitted a workflow blocks until it has finished and gets its status and
// result in one call. The wait is on this session's latch, set by the
// commit that ended the job (wakeup.hpp, result waiters; children.hpp,
// jobs_ended) -- no polling, no NOTIFY. Each wake-up reads the job again
// with the latest snapshot, whatever the isolation level.
#include "core/error.hpp"
#include "core/validation.hpp"
#include "pg/api/frame.hpp"
#include "pg/api/workflow.hpp"
#include "pg/api/waiting.hpp"
#include "pg/citus/cluster_calls.hpp"
#include "pg/jobs/children.hpp"
#include "pg/runtime/shared_memory.hpp"
#include "pg/runtime/wakeup.hpp"

namespace wf::pg {
namespace {

// changed_by: the transaction that wrote the row's current version.
PreparedStatement read_job_result(
    "SELECT CASE WHEN " WF_SQL_JOB_RUNNING("j") " THEN 'running' ELSE j.status END AS status,"
    "       j.status IN ('done', 'failed', 'cancelled') AS finished, j.result,"
    "       j.last_error AS error, j.xmin AS changed_by"
    "  FROM wf.job j WHERE j.queue = $1 AND j.id = $2",
    {TEXTOID, INT8OID});

PreparedStatement first_step(
    "SELECT xmin AS changed_by FROM wf.job WHERE workflow_id = $1 ORDER BY id LIMIT 1",
    {UUIDOID});

// Registered as a result waiter for as long as it lives.
class ResultWait {
public:
    explicit ResultWait(uint32 hash) : registered_(begin_waiting_for_result(hash)) {}
    ~ResultWait() {
        if (registered_) end_waiting();
    }

private:
    bool registered_;
};

// Waiting for a job or workflow: produce (its producer) or operate.
void require_waiting_right(std::string_view queue) {
    if (!has_right(RunAsOwner::caller(), Capability::operate, queue))
        require_right(Capability::produce, queue);
}

TimestampTz deadline_after(FunctionCallInfo fcinfo, int n) {
    double seconds = interval_seconds(interval_arg(fcinfo, n, "timeout", true));
    // Longer waits than a day are a day: the client can call again.
    seconds = std::min(seconds, 86400.0);
    return GetCurrentTimestamp() + static_cast<int64>(seconds * 1e6);
}

// Sleeps until woken or the deadline, or `poll_ms` at most (when not 0);
// false once the deadline has passed.
bool sleep_until_woken(TimestampTz deadline, long poll_ms = 0) {
    long remaining_ms = static_cast<long>((deadline - GetCurrentTimestamp()) / 1000);
    if (remaining_ms <= 0) return false;
    long timeout = shared_memory_ready() ? remaining_ms
                                         : std::min(remaining_ms, kPollWithoutSharedMemoryMs);
    if (poll_ms > 0) timeout = std::min(timeout, poll_ms);
    release_route_lock();  // on a distributed pg_wf (shard_route.hpp)
    call([&] {
        if (statement_reads_nothing_else()) MyProc->xmin = InvalidTransactionId;
        wait_for_latch_or_lost_client(timeout);
        ResetLatch(MyLatch);
        CHECK_FOR_INTERRUPTS();
        AcceptInvalidationMessages();
    });
    retake_route_lock();
    return true;
}

bool written_by_this_transaction(Datum xmin) {
    return call([&] { return TransactionIdIsCurrentTransactionId(DatumGetTransactionId(xmin)); });
}

constexpr long kClusterPollMs = 200;

// On a distributed pg_wf: whether this transaction wrote the workflow's row
// (submitted it). wf.workflow is a reference table, and Citus reads a
// node's own copy in the node's transaction.
bool workflow_written_here(Datum workflow_id) {
    char* id = call([&] { return DatumGetCString(DirectFunctionCall1(uuid_out, workflow_id)); });
    Rows row = run_through_citus("SELECT xmin AS changed_by FROM wf.workflow WHERE id = " +
                                 sql_literal(id) + "::pg_catalog.uuid");
    bool written = !row.empty() && written_by_this_transaction(row.datum(0, "changed_by"));
    row.free();
    return written;
}

void emit_result(FunctionCallInfo fcinfo, Datum status, std::optional<Datum> result,
                 std::optional<Datum> error) {
    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    Datum values[3] = {status, result.value_or(0), error.value_or(0)};
    bool nulls[3] = {false, !result, !error};
    call([&] { tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls); });
}

[[noreturn]] void waits_for_itself(const std::string& what) {
    throw core::Error("55000", what + " in this transaction: nothing else can see it yet",
                      "Waiting for it here would wait for the whole timeout.",
                      "Commit first, then wait (in a new transaction).");
}

}  // namespace
}  // namespace wf::pg

using namespace wf;
using namespace wf::pg;

// wf_wait_job(queue, id, timeout) -> TABLE(status, result, error)
WF_SQL_FUNCTION(wf_wait_job) {
    std::string_view queue = queue_arg(fcinfo, 0);
    int64 id = int64_arg(fcinfo, 1, "id");
    TimestampTz deadline = deadline_after(fcinfo, 2);
    Datum queue_datum = PG_GETARG_DATUM(0);

    call([&] { InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC); });
    with_queue_tables(PG_GETARG_DATUM(0), [&] {
        require_waiting_right(queue);
        // Registered and latch reset before the first read: a commit after
        // that read's snapshot sets the latch, so no wake-up is lost.
        ResultWait registration(job_result_hash(id));
        call([] { ResetLatch(MyLatch); });
        Params<2> p;
        p.set(0, queue_datum);
        p.set(1, Int64GetDatum(id));
        for (bool waiting = true;; waiting = sleep_until_woken(deadline)) {
            Rows job = read_job_result.execute_latest(p.values, p.nulls);
            if (job.empty())
                throw core::Error("42704",
                                  "job " + std::to_string(id) + " does not exist in queue \"" +
                                      std::string(queue) + "\"",
                                  {}, "It may have been removed by retention (wf.retention).");
            bool finished = job.bool_at(0, "finished");
            if (!finished && waiting && written_by_this_transaction(job.datum(0, "changed_by")))
                waits_for_itself("job " + std::to_string(id) + " was enqueued or changed");
            if (finished || !waiting) {
                auto column = [&](const char* name) -> std::optional<Datum> {
                    if (job.is_null(0, name)) return std::nullopt;
                    return job.datum(0, name);
                };
                emit_result(fcinfo, job.datum(0, "status"), column("result"), column("error"));
                return;
            }
            job.free();
        }
    });
    return 0;
}

// wf_wait_workflow(workflow_id, timeout) -> TABLE(status, result, error)
WF_SQL_FUNCTION(wf_wait_workflow) {
    core::require_not_null(PG_ARGISNULL(0), "workflow_id");
    Datum workflow_id = PG_GETARG_DATUM(0);
    pg_uuid_t uuid;
    std::memcpy(&uuid, DatumGetUUIDP(workflow_id), sizeof uuid);
    TimestampTz deadline = deadline_after(fcinfo, 1);

    call([&] { InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC); });
    with_job_tables_anywhere([&] {
        Params<1> p;
        p.set(0, workflow_id);
        std::vector<std::string> queues = workflow_step_queues(workflow_id);
        if (queues.empty()) no_such_workflow(workflow_id);
        for (const std::string& queue : queues) require_waiting_right(queue);

        // On a distributed pg_wf the steps end on other nodes, whose
        // commits set no latch here: the outcome is read again every
        // kClusterPollMs, doubling from its first tenth.
        const bool cluster = distributed();
        long poll_ms = cluster ? kClusterPollMs / 10 : 0;
        ResultWait registration(workflow_result_hash(uuid));
        call([] { ResetLatch(MyLatch); });
        for (bool waiting = true;; waiting = sleep_until_woken(deadline, poll_ms)) {
            WorkflowOutcome outcome = read_workflow_outcome(workflow_id);
            if (!outcome.finished && waiting && !cluster) {
                Rows first = first_step.execute_latest(p.values, p.nulls);
                if (!first.empty() && written_by_this_transaction(first.datum(0, "changed_by")))
                    waits_for_itself("the workflow was submitted or changed");
            }
            if (!outcome.finished && waiting && cluster) {
                if (workflow_written_here(workflow_id)) waits_for_itself("the workflow was submitted");
                poll_ms = std::min(poll_ms * 2, kClusterPollMs);
            }
            if (outcome.finished || !waiting) {
                std::optional<Datum> results, error;
                if (outcome.finished) {
                    const std::string& json = *outcome.results_json;
                    results = call([&] {
                        return DirectFunctionCall1(jsonb_in, CStringGetDatum(json.c_str()));
                    });
                }
                if (outcome.error) error = text_datum(*outcome.error);
                emit_result(fcinfo, text_datum(outcome.status), results, error);
                return;
            }
        }
    });
    return 0;
}
