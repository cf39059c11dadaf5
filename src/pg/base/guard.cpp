#include "pg/base/guard.hpp"

#include <new>

#include "core/error.hpp"
#include "pg/base/statement_settings.hpp"

namespace wf::pg {

void throw_pending_pg_error(MemoryContext context) {
    MemoryContextSwitchTo(context);
    ErrorData* data = CopyErrorData();
    FlushErrorState();
    throw PgError(data);
}

namespace {

// What went wrong, in plain buffers: filling it allocates nothing, so the
// catch blocks below cannot themselves fail.
struct Failure {
    ErrorData* pg_error = nullptr;
    char sqlstate[6] = "XX000";
    char message[1024] = "";
    char detail[1024] = "";
    char hint[512] = "";
};

void copy_text(char* to, std::size_t size, const char* from) {
    std::size_t n = std::strlen(from);
    if (n >= size) n = size - 1;
    std::memcpy(to, from, n);
    to[n] = '\0';
}

template <typename Body>
bool invoke(Body&& body, Failure* failure) {
    try {
        body();
        return true;
    } catch (const PgError& e) {
        failure->pg_error = e.data();
    } catch (const core::Error& e) {
        copy_text(failure->sqlstate, sizeof failure->sqlstate, e.sqlstate());
        copy_text(failure->message, sizeof failure->message, e.what());
        copy_text(failure->detail, sizeof failure->detail, e.detail().c_str());
        copy_text(failure->hint, sizeof failure->hint, e.hint().c_str());
    } catch (const std::bad_alloc&) {
        copy_text(failure->sqlstate, sizeof failure->sqlstate, "53200");
        copy_text(failure->message, sizeof failure->message, "out of memory");
    } catch (const std::exception& e) {
        copy_text(failure->message, sizeof failure->message, e.what());
    } catch (...) {
        copy_text(failure->message, sizeof failure->message, "unexpected C++ exception");
    }
    return false;
}

// Raised only once every C++ frame of the call has returned: the longjmp
// crosses no destructor.
[[noreturn]] void raise_failure(const Failure& failure) {
    if (failure.pg_error != nullptr) ReThrowError(failure.pg_error);
    const char* s = failure.sqlstate;
    ereport(ERROR, (errcode(MAKE_SQLSTATE(s[0], s[1], s[2], s[3], s[4])),
                    errmsg_internal("%s", failure.message),
                    failure.detail[0] ? errdetail_internal("%s", failure.detail) : 0,
                    failure.hint[0] ? errhint("%s", failure.hint) : 0));
    pg_unreachable();
}

}  // namespace

Datum run_sql_function(FunctionCallInfo fcinfo, SqlFunctionBody body, bool index_scans_only) {
    Datum result = 0;
    Failure failure;
    StatementSettingsScope outer_settings = enter_statement_settings(index_scans_only);
    bool returned = invoke([&] { result = body(fcinfo); }, &failure);
    leave_statement_settings(outer_settings, returned);
    if (returned) return result;
    raise_failure(failure);
}

void run_guarded(GuardedBody body, void* context) {
    Failure failure;
    if (invoke([&] { body(context); }, &failure)) return;
    raise_failure(failure);
}

}  // namespace wf::pg
