// What an operator does to jobs: wf_retry (back from the dead letter) and
// wf_cancel. The transitions are in job_state.cpp.
#include "pg/api/frame.hpp"

using namespace wf::pg;

// wf_retry(queue, id) -> boolean: a failed or cancelled job runs again, and
// the jobs its failure cancelled wait on it again.
WF_SQL_FUNCTION(wf_retry) {
    std::string_view queue = queue_arg(fcinfo, 0);
    int64 id = int64_arg(fcinfo, 1, "id");
    bool retried = with_job_tables([&] {
        require_right(Capability::operate, queue);
        return retry_job(PG_GETARG_DATUM(0), id);
    });
    PG_RETURN_BOOL(retried);
}

// wf_cancel(queue, id) -> boolean
WF_SQL_FUNCTION(wf_cancel) {
    std::string_view queue = queue_arg(fcinfo, 0);
    int64 id = int64_arg(fcinfo, 1, "id");
    bool cancelled = with_job_tables([&] {
        require_right(Capability::operate, queue);
        return cancel_job(PG_GETARG_DATUM(0), id);
    });
    PG_RETURN_BOOL(cancelled);
}
