// The frame every SQL function of pg_wf runs in: its arguments read into
// typed values once, then its work inside SPI on a schema this library
// serves. (The C++/PostgreSQL boundary itself is WF_SQL_FUNCTION, guard.hpp.)
#pragma once

#include "core/error.hpp"
#include "pg/api/rights.hpp"
#include "pg/base/args.hpp"
#include "pg/citus/shard_route.hpp"
#include "pg/jobs/job_state.hpp"
#include "pg/runtime/extension.hpp"
#include "pg/runtime/run_as.hpp"

namespace wf::pg {

// Runs `body` inside SPI, as pg_wf's owner (run_as.hpp), after checking
// that the extension's SQL objects are a version this library serves (55000
// otherwise). The body checks its caller's rights first (require_right).
// See with_spi for what the body may return.
template <typename Body>
decltype(auto) with_job_tables(Body&& body) {
    RunAsOwner as_owner(pg_wf_owner());
    return with_spi([&]() -> decltype(auto) {
        refuse_if_distributed();
        return body();
    });
}

// with_job_tables for reads that also serve a distributed pg_wf as they
// are (the rights check behind the views).
template <typename Body>
decltype(auto) with_job_tables_anywhere(Body&& body) {
    RunAsOwner as_owner(pg_wf_owner());
    return with_spi(std::forward<Body>(body));
}

// with_job_tables for a call about one queue. On a distributed pg_wf its
// statements name the local shards of that queue's group
// (citus/shard_route.hpp); on one server this is with_job_tables.
template <typename Body>
decltype(auto) with_queue_tables(Datum queue, Body&& body) {
    RunAsOwner as_owner(pg_wf_owner());
    return with_spi([&]() -> decltype(auto) {
        ShardRoute route(queue);
        return body();
    });
}

// A function whose arguments grew in a later schema version is called with
// fewer by the SQL objects of an older one (before ALTER EXTENSION pg_wf
// UPDATE): it refuses as require_current_schema does, before it reads an
// argument that is not there.
inline void require_arguments(FunctionCallInfo fcinfo, int count) {
    if (PG_NARGS() >= count) return;
    require_current_schema();
    throw core::Error("55000", "pg_wf's function was called with fewer arguments than its library reads",
                      {}, "Run ALTER EXTENSION pg_wf UPDATE.");
}

// Arguments 0..2 of a worker write: the fencing token (queue, id, attempt),
// validated (non-NULL, a valid queue name).
inline FencingToken fencing_token_arg(FunctionCallInfo fcinfo) {
    FencingToken token;
    token.queue_name = queue_arg(fcinfo, 0);
    token.queue = PG_GETARG_DATUM(0);
    token.id = int64_arg(fcinfo, 1, "id");
    token.attempt = int32_arg(fcinfo, 2, "attempt");
    return token;
}

// An optional argument: none when NULL.
inline std::optional<Datum> optional_arg(FunctionCallInfo fcinfo, int n) {
    if (PG_ARGISNULL(n)) return std::nullopt;
    return PG_GETARG_DATUM(n);
}

// Returns `ids` as the rows of a SETOF bigint function.
inline void return_ids(FunctionCallInfo fcinfo, const std::vector<int64>& ids) {
    call([&] { InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC); });
    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    for (int64 id : ids) {
        Datum value = Int64GetDatum(id);
        bool isnull = false;
        call([&] { tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, &value, &isnull); });
    }
}

}  // namespace wf::pg
