// The C++/PostgreSQL boundary, in one place.
//
//  * PostgreSQL -> C++: every SQL-callable function is declared with
//    WF_SQL_FUNCTION, whose entry point runs the C++ body inside a catch-all
//    and raises PostgreSQL errors only after every C++ frame has returned.
//  * C++ -> PostgreSQL: every call that can ereport() goes through
//    wf::pg::call(), which catches the longjmp right there and rethrows it as
//    wf::pg::PgError, so C++ destructors always run. The lambda given to
//    call() must not own anything with a destructor: it only calls C.
#pragma once

#include <exception>

#include "pg/base/postgres.hpp"

namespace wf::pg {

// A PostgreSQL error caught in C++; the entry point re-raises it unchanged
// (same SQLSTATE, message, detail, hint).
class PgError : public std::exception {
public:
    explicit PgError(ErrorData* data) : data_(data) {}
    ErrorData* data() const { return data_; }
    const char* what() const noexcept override { return data_->message; }

private:
    ErrorData* data_;
};

// Copies the error being handled into `context`, clears PostgreSQL's error
// state and throws PgError. Called only right after a PG_CATCH.
[[noreturn]] void throw_pending_pg_error(MemoryContext context);

// A C++ exception from `fn` (it should throw none) is carried past
// PG_END_TRY, which must run to restore PostgreSQL's error stack.
template <typename F>
decltype(auto) call(F&& fn) {
    using Result = decltype(fn());
    MemoryContext context = CurrentMemoryContext;
    bool failed = false;
    std::exception_ptr cpp_error;
    if constexpr (std::is_void_v<Result>) {
        PG_TRY();
        {
            try {
                fn();
            } catch (...) {
                cpp_error = std::current_exception();
            }
        }
        PG_CATCH();
        { failed = true; }
        PG_END_TRY();
        if (failed) throw_pending_pg_error(context);
        if (cpp_error) std::rethrow_exception(cpp_error);
    } else {
        static_assert(std::is_trivially_destructible_v<Result>,
                      "wf::pg::call returns only plain values");
        Result result{};
        PG_TRY();
        {
            try {
                result = fn();
            } catch (...) {
                cpp_error = std::current_exception();
            }
        }
        PG_CATCH();
        { failed = true; }
        PG_END_TRY();
        if (failed) throw_pending_pg_error(context);
        if (cpp_error) std::rethrow_exception(cpp_error);
        return result;
    }
}

using SqlFunctionBody = Datum (*)(FunctionCallInfo);

// Runs `body`; any C++ exception becomes an ereport(ERROR) raised from a
// frame that owns no C++ object. Its statements run with pg_wf's settings
// (statement_settings.hpp), `index_scans_only` saying whether
// enable_seqscan is off for them.
Datum run_sql_function(FunctionCallInfo fcinfo, SqlFunctionBody body, bool index_scans_only);

// The same for C++ work started from C code (the background worker).
using GuardedBody = void (*)(void* context);
void run_guarded(GuardedBody body, void* context);

}  // namespace wf::pg

#define WF_SQL_FUNCTION_WITH_SCANS(name, index_scans_only)                      \
    static Datum name##_body(FunctionCallInfo fcinfo);                          \
    extern "C" {                                                                \
    PG_FUNCTION_INFO_V1(name);                                                  \
    Datum name(PG_FUNCTION_ARGS) {                                              \
        return wf::pg::run_sql_function(fcinfo, name##_body, index_scans_only); \
    }                                                                           \
    }                                                                           \
    static Datum name##_body(FunctionCallInfo fcinfo)
// A SQL function of pg_wf's hot paths: its statements go through indexes.
#define WF_SQL_FUNCTION(name) WF_SQL_FUNCTION_WITH_SCANS(name, true)
// One off them (configuration, grants, schedules, metrics, the views'
// filters): its statements keep the planner's choice of scans.
#define WF_SQL_FUNCTION_ANY_SCAN(name) WF_SQL_FUNCTION_WITH_SCANS(name, false)
