// How an attempt ends: wf_complete, wf_complete_many, wf_fail. Every one is
// fenced by its token (queue, id, attempt); the transitions themselves are
// in job_state.cpp.
#include "core/error.hpp"
#include "core/validation.hpp"
#include "pg/api/frame.hpp"

using namespace wf;
using namespace wf::pg;

// wf_complete(queue, id, attempt, result) -> boolean: true when the job
// ended done; false for a stale token (or a job cancelled while it ran).
WF_SQL_FUNCTION(wf_complete) {
    FencingToken token = fencing_token_arg(fcinfo);
    if (!PG_ARGISNULL(3)) payload_arg(fcinfo, 3, "result");
    bool done = with_queue_tables(PG_GETARG_DATUM(0), [&] {
        require_right(Capability::work, token.queue_name);
        bool ended_done = false;
        complete_job(token, optional_arg(fcinfo, 3), &ended_done);
        return ended_done;
    });
    PG_RETURN_BOOL(done);
}

// wf_complete_many(queue, ids, attempts, results) -> SETOF bigint: the ids
// completed; a stale (id, attempt) is left out and changes nothing.
WF_SQL_FUNCTION(wf_complete_many) {
    std::string_view queue = queue_arg(fcinfo, 0);
    core::require_not_null(PG_ARGISNULL(1), "ids");
    core::require_not_null(PG_ARGISNULL(2), "attempts");
    Datum ids = PG_GETARG_DATUM(1), attempts = PG_GETARG_DATUM(2);
    int n_ids = 0, n_attempts = 0, n_results = 0;
    bool has_null = false;
    call([&] {
        ArrayType* a = DatumGetArrayTypeP(ids);
        ArrayType* b = DatumGetArrayTypeP(attempts);
        n_ids = ArrayGetNItems(ARR_NDIM(a), ARR_DIMS(a));
        n_attempts = ArrayGetNItems(ARR_NDIM(b), ARR_DIMS(b));
        has_null = array_contains_nulls(a) || array_contains_nulls(b);
    });
    if (has_null)
        throw core::Error(core::sqlstate::null_not_allowed,
                          "ids and attempts must not contain null");
    if (n_ids != n_attempts)
        throw core::Error(core::sqlstate::invalid_parameter,
                          "ids and attempts must have the same length",
                          std::to_string(n_ids) + " ids, " + std::to_string(n_attempts) +
                              " attempts.");
    core::validate_batch_length(static_cast<size_t>(n_ids));
    if (!PG_ARGISNULL(3)) {
        Datum results = PG_GETARG_DATUM(3);
        size_t largest = 0;
        call([&] {
            ArrayType* r = DatumGetArrayTypeP(results);
            n_results = ArrayGetNItems(ARR_NDIM(r), ARR_DIMS(r));
            Datum* items;
            bool* nulls;
            int count;
            deconstruct_array(r, JSONBOID, -1, false, TYPALIGN_INT, &items, &nulls, &count);
            for (int i = 0; i < count; i++)
                if (!nulls[i]) largest = std::max<size_t>(largest, toast_raw_datum_size(items[i]));
        });
        if (n_results != n_ids)
            throw core::Error(core::sqlstate::invalid_parameter,
                              "results must have one element per id",
                              std::to_string(n_ids) + " ids, " + std::to_string(n_results) +
                                  " results.");
        core::validate_payload_size(largest > VARHDRSZ ? largest - VARHDRSZ : 0,
                                    static_cast<size_t>(max_payload_size), "result");
    }

    std::vector<int64> done = with_queue_tables(PG_GETARG_DATUM(0), [&] {
        require_right(Capability::work, queue);
        return complete_jobs(PG_GETARG_DATUM(0), ids, attempts, optional_arg(fcinfo, 3),
                             static_cast<size_t>(n_ids));
    });
    return_ids(fcinfo, done);
    return 0;
}

// wf_fail(queue, id, attempt, error, retry_in, permanent) -> text: the new
// status, or NULL for a stale token.
WF_SQL_FUNCTION(wf_fail) {
    FencingToken token = fencing_token_arg(fcinfo);
    std::string_view error = text_arg(fcinfo, 3, "error");
    std::optional<double> retry_in;
    if (!PG_ARGISNULL(4)) retry_in = interval_seconds(interval_arg(fcinfo, 4, "retry_in", true));
    bool permanent = bool_arg(fcinfo, 5, "permanent");
    core::validate_payload_size(error.size(), static_cast<size_t>(max_payload_size), "error");

    const char* status = with_queue_tables(PG_GETARG_DATUM(0), [&] {
        require_right(Capability::work, token.queue_name);
        return fail_job(token, PG_GETARG_DATUM(3), retry_in, permanent);
    });
    if (status == nullptr) PG_RETURN_NULL();
    PG_RETURN_DATUM(text_datum(status));
}
