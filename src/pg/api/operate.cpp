// What an operator does to jobs: wf_retry (back from the dead letter) and
// wf_cancel, one job or the jobs of a queue that match (wf_retry_where,
// wf_cancel_where). The transitions are in job_state.cpp.
#include "core/validation.hpp"
#include "pg/api/frame.hpp"

using namespace wf;
using namespace wf::pg;

// wf_retry(queue, id) -> boolean: a failed or cancelled job runs again, and
// the jobs its failure cancelled wait on it again.
WF_SQL_FUNCTION(wf_retry) {
    std::string_view queue = queue_arg(fcinfo, 0);
    int64 id = int64_arg(fcinfo, 1, "id");
    bool retried = with_queue_tables(PG_GETARG_DATUM(0), [&] {
        require_right(Capability::operate, queue);
        return retry_job(PG_GETARG_DATUM(0), id);
    });
    PG_RETURN_BOOL(retried);
}

// wf_cancel(queue, id) -> boolean
WF_SQL_FUNCTION(wf_cancel) {
    std::string_view queue = queue_arg(fcinfo, 0);
    int64 id = int64_arg(fcinfo, 1, "id");
    bool cancelled = with_queue_tables(PG_GETARG_DATUM(0), [&] {
        require_right(Capability::operate, queue);
        return cancel_job(PG_GETARG_DATUM(0), id);
    });
    PG_RETURN_BOOL(cancelled);
}

namespace wf::pg {
namespace {

// The jobs a bulk action may act on, in id order, at most $5 (or $4).
PreparedStatement retryable_jobs(
    "SELECT j.id FROM wf.job j"
    " WHERE j.queue = $1 AND j.status IN ('failed', 'cancelled')"
    "   AND ($2::bigint[] IS NULL OR j.id = ANY ($2))"
    "   AND ($3::text IS NULL OR strpos(lower(coalesce(j.last_error, '')), lower($3)) > 0)"
    " ORDER BY j.id LIMIT $4",
    {TEXTOID, INT8ARRAYOID, TEXTOID, INT4OID});

PreparedStatement cancellable_jobs(
    "SELECT j.id FROM wf.job j"
    " WHERE j.queue = $1 AND j.status IN ('blocked', 'pending', 'waiting', 'failed')"
    "   AND NOT j.cancel_requested"
    "   AND ($2::bigint[] IS NULL OR j.id = ANY ($2))"
    "   AND ($3::text IS NULL OR strpos(lower(coalesce(j.last_error, '')), lower($3)) > 0)"
    "   AND ($4::text[] IS NULL"
    "        OR CASE WHEN " WF_SQL_JOB_RUNNING("j") " THEN 'running' ELSE j.status END = ANY ($4))"
    " ORDER BY j.id LIMIT $5",
    {TEXTOID, INT8ARRAYOID, TEXTOID, TEXTARRAYOID, INT4OID});

// Bulk arguments: ids (no NULL element), error_contains, max_jobs.
void check_bulk_args(FunctionCallInfo fcinfo, int max_jobs_arg) {
    if (!PG_ARGISNULL(1)) {
        Datum d = PG_GETARG_DATUM(1);
        bool has_nulls = call([&] { return array_contains_nulls(DatumGetArrayTypeP(d)); });
        if (has_nulls)
            throw core::Error(core::sqlstate::null_not_allowed, "ids must not contain null");
    }
    if (!PG_ARGISNULL(2)) core::validate_label(text_arg(fcinfo, 2, "error_contains"), "error_contains");
    core::validate_positive(int32_arg(fcinfo, max_jobs_arg, "max_jobs"), "max_jobs");
}

}  // namespace
}  // namespace wf::pg

// wf_retry_where(queue, ids, error_contains, max_jobs) -> int: the failed or
// cancelled jobs that match are retried, job by job as wf_retry would; one
// whose dependency is dead (failed, cancelled, and not retried here before
// it) is left as it is.
WF_SQL_FUNCTION(wf_retry_where) {
    std::string_view queue = queue_arg(fcinfo, 0);
    check_bulk_args(fcinfo, 3);
    int32 retried = with_queue_tables(PG_GETARG_DATUM(0), [&] {
        require_right(Capability::operate, queue);
        Params<4> p;
        for (int i = 0; i < 4; i++) p.set_or_null(i, PG_ARGISNULL(i), PG_GETARG_DATUM(i));
        std::vector<int64> ids = retryable_jobs.execute(p.values, p.nulls).int64_column("id");
        int32 count = 0;
        for (int64 id : ids) {
            try {
                if (retry_job(PG_GETARG_DATUM(0), id)) count++;
            } catch (const wf::core::Error& e) {
                // Its dependency is dead: the error of wf_retry, raised
                // before anything changed. In a bulk retry, it stays.
                if (std::string_view(e.sqlstate()) != "55000") throw;
            }
        }
        return count;
    });
    PG_RETURN_INT32(retried);
}

// wf_cancel_where(queue, ids, error_contains, statuses, max_jobs) -> int: the
// matching jobs are cancelled (running ones flagged), as wf_cancel would.
WF_SQL_FUNCTION(wf_cancel_where) {
    std::string_view queue = queue_arg(fcinfo, 0);
    check_bulk_args(fcinfo, 4);
    if (!PG_ARGISNULL(3)) {
        Datum d = PG_GETARG_DATUM(3);
        Datum* items = nullptr;
        bool* nulls = nullptr;
        int count = 0;
        call([&] { deconstruct_array(DatumGetArrayTypeP(d), TEXTOID, -1, false, 'i', &items, &nulls, &count); });
        for (int i = 0; i < count; i++) {
            if (nulls[i])
                throw wf::core::Error(wf::core::sqlstate::null_not_allowed,
                                      "statuses must not contain null");
            text* t = call([&] { return DatumGetTextPP(items[i]); });
            std::string status(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
            if (status != "blocked" && status != "pending" && status != "running" &&
                status != "waiting" && status != "failed")
                throw wf::core::Error(wf::core::sqlstate::invalid_parameter,
                                      "cannot cancel jobs of status \"" + status + "\"",
                                      {}, "statuses may name blocked, pending, running, waiting "
                                          "and failed.");
        }
    }
    int32 cancelled = with_queue_tables(PG_GETARG_DATUM(0), [&] {
        require_right(Capability::operate, queue);
        Params<5> p;
        for (int i = 0; i < 5; i++) p.set_or_null(i, PG_ARGISNULL(i), PG_GETARG_DATUM(i));
        std::vector<int64> ids = cancellable_jobs.execute(p.values, p.nulls).int64_column("id");
        int32 count = 0;
        for (int64 id : ids)
            if (cancel_job(PG_GETARG_DATUM(0), id)) count++;
        return count;
    });
    PG_RETURN_INT32(cancelled);
}
