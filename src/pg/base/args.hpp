// Reading SQL arguments: a NULL where a value is required, or a value the
// core rejects, becomes an error naming the argument.
#pragma once

#include "pg/base/guard.hpp"

namespace wf::pg {

extern int max_payload_size;  // GUC wf.max_payload_size, bytes

std::string_view text_arg(FunctionCallInfo fcinfo, int n, const char* name);
std::string_view queue_arg(FunctionCallInfo fcinfo, int n);
int32 int32_arg(FunctionCallInfo fcinfo, int n, const char* name);
int64 int64_arg(FunctionCallInfo fcinfo, int n, const char* name);
bool bool_arg(FunctionCallInfo fcinfo, int n, const char* name);
// A jsonb argument, checked against wf.max_payload_size.
Datum payload_arg(FunctionCallInfo fcinfo, int n, const char* name);

// Seconds in an interval, with PostgreSQL's 30-day months.
double interval_seconds(const Interval* interval);
// A non-NULL interval argument that must be positive (or >= 0).
Interval* interval_arg(FunctionCallInfo fcinfo, int n, const char* name, bool zero_allowed);

}  // namespace wf::pg
