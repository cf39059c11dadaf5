#include "pg/base/args.hpp"

#include "core/error.hpp"
#include "core/validation.hpp"

namespace wf::pg {

int max_payload_size = 1024 * 1024;

std::string_view text_arg(FunctionCallInfo fcinfo, int n, const char* name) {
    core::require_not_null(PG_ARGISNULL(n), name);
    Datum d = PG_GETARG_DATUM(n);
    text* t = call([&] { return DatumGetTextPP(d); });
    return std::string_view(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
}

std::string_view queue_arg(FunctionCallInfo fcinfo, int n) {
    std::string_view queue = text_arg(fcinfo, n, "queue");
    core::validate_queue_name(queue);
    return queue;
}

int32 int32_arg(FunctionCallInfo fcinfo, int n, const char* name) {
    core::require_not_null(PG_ARGISNULL(n), name);
    return PG_GETARG_INT32(n);
}

int64 int64_arg(FunctionCallInfo fcinfo, int n, const char* name) {
    core::require_not_null(PG_ARGISNULL(n), name);
    return PG_GETARG_INT64(n);
}

bool bool_arg(FunctionCallInfo fcinfo, int n, const char* name) {
    core::require_not_null(PG_ARGISNULL(n), name);
    return PG_GETARG_BOOL(n);
}

Datum payload_arg(FunctionCallInfo fcinfo, int n, const char* name) {
    core::require_not_null(PG_ARGISNULL(n), name);
    Datum d = PG_GETARG_DATUM(n);
    core::validate_payload_size(toast_raw_datum_size(d) - VARHDRSZ,
                                static_cast<size_t>(max_payload_size), name);
    return d;
}

double interval_seconds(const Interval* interval) {
    return static_cast<double>(interval->time) / USECS_PER_SEC +
           (static_cast<double>(interval->month) * DAYS_PER_MONTH + interval->day) * SECS_PER_DAY;
}

Interval* interval_arg(FunctionCallInfo fcinfo, int n, const char* name, bool zero_allowed) {
    core::require_not_null(PG_ARGISNULL(n), name);
    Interval* interval = PG_GETARG_INTERVAL_P(n);
    core::validate_interval_seconds(interval_seconds(interval), name, zero_allowed);
    return interval;
}

}  // namespace wf::pg
