// Calls across nodes on a distributed pg_wf (see cluster_calls.hpp).
#include "pg/citus/cluster_calls.hpp"

#include <exception>
#include <set>

#include "core/error.hpp"
#include "pg/base/statement_settings.hpp"

namespace wf::pg {
namespace {

// The scope of one statement through Citus: the bootstrap superuser (the
// caller's security context otherwise kept), and, in a GUC level of its
// own, pg_wf's search_path and one connection per node for multi-shard
// statements (a delegated call in a transaction that read shards over
// several connections to a node is refused by Citus). Left normally, both
// are restored; left by an error, the (sub)transaction's abort restores
// the settings, and the destructor the user.
class ThroughCitus {
public:
    ThroughCitus() {
        GetUserIdAndSecContext(&saved_user_, &saved_context_);
        nest_level_ = call([] {
            pin_statement_settings();  // first: the function's level stays below this one
            int level = NewGUCNestLevel();
            set_config_option("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_SESSION,
                              GUC_ACTION_SAVE, true, 0, false);
            set_config_option("citus.multi_shard_modify_mode", "sequential", PGC_USERSET,
                              PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
            return level;
        });
        // Last: nothing after it can throw before the destructor is armed.
        SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID, saved_context_ | SECURITY_LOCAL_USERID_CHANGE);
    }
    ~ThroughCitus() {
        if (std::uncaught_exceptions() == exceptions_) {
            int level = nest_level_;
            try {
                call([&] { AtEOXact_GUC(true, level); });
            } catch (...) {
                // Restoring settings cannot fail short of running out of
                // memory; the transaction's end restores them then.
            }
        }
        SetUserIdAndSecContext(saved_user_, saved_context_);
    }
    ThroughCitus(const ThroughCitus&) = delete;
    ThroughCitus& operator=(const ThroughCitus&) = delete;

private:
    Oid saved_user_;
    int saved_context_;
    int nest_level_ = 0;
    int exceptions_ = std::uncaught_exceptions();
};

std::string datum_literal(std::optional<Datum> value, Oid output_function_of, const char* cast) {
    if (!value) return "NULL";
    Datum datum = *value;
    char* text = call([&] {
        Oid output;
        bool varlena;
        getTypeOutputInfo(output_function_of, &output, &varlena);
        return OidOutputFunctionCall(output, datum);
    });
    std::string literal = sql_literal(text);
    call([&] { pfree(text); });
    return literal + "::" + cast;
}

}  // namespace

std::string sql_literal(std::string_view value) {
    std::string copy(value);
    char* quoted = call([&] { return quote_literal_cstr(copy.c_str()); });
    std::string literal(quoted);
    call([&] { pfree(quoted); });
    return literal;
}

std::string jsonb_literal(std::optional<Datum> value) {
    return datum_literal(value, JSONBOID, "pg_catalog.jsonb");
}

std::string timestamptz_literal(std::optional<Datum> value) {
    return datum_literal(value, TIMESTAMPTZOID, "pg_catalog.timestamptz");
}

Rows run_through_citus(const std::string& sql) {
    ThroughCitus scope;
    int rc = call([&] { return SPI_execute(sql.c_str(), false, 0); });  // pinned by the scope
    if (rc < 0) throw core::Error("XX000", std::string("SPI_execute failed: ") + SPI_result_code_string(rc));
    return Rows(SPI_tuptable, SPI_processed);
}

std::vector<std::string> one_queue_per_group(const std::vector<std::string>& queries) {
    std::set<std::string> queues;
    for (const std::string& query : queries) {
        Rows rows = run_through_citus(query);
        for (uint64 r = 0; r < rows.size(); r++) queues.insert(rows.text_at(r, "queue"));
    }
    if (queues.empty()) return {};
    // Citus names the shard of each: the queues of one group share it.
    std::string list;
    for (const std::string& queue : queues) list += (list.empty() ? "" : ", ") + sql_literal(queue);
    Rows rows = run_through_citus(
        "SELECT DISTINCT ON (shard) queue FROM ("
        "  SELECT pg_catalog.get_shard_id_for_distribution_column('wf.job', q) AS shard, q AS queue"
        "    FROM pg_catalog.unnest(ARRAY[" + list + "]::pg_catalog.text[]) AS q) AS s"
        " ORDER BY shard, queue");
    std::vector<std::string> one_each;
    for (uint64 r = 0; r < rows.size(); r++) one_each.push_back(rows.text_at(r, "queue"));
    return one_each;
}

namespace {
Rows call_in_group_rows(const char* function, const std::string& queue, const std::string& arguments) {
    // FROM, not a plain SELECT: Citus sends a call made inside a function
    // only in this form, and only with the queue as a constant.
    return run_through_citus(std::string("SELECT r FROM wf.") + function + "(" + sql_literal(queue) +
                             "::pg_catalog.text" + (arguments.empty() ? "" : ", " + arguments) +
                             ") AS r");
}
}  // namespace

int64 call_in_group(const char* function, const std::string& queue, const std::string& arguments) {
    Rows rows = call_in_group_rows(function, queue, arguments);
    if (rows.size() != 1 || rows.is_null(0, "r")) return 0;
    Datum value = rows.datum(0, "r");
    Oid type = call([&] { return SPI_gettypeid(rows.table()->tupdesc, 1); });
    return type == INT8OID ? DatumGetInt64(value) : DatumGetInt32(value);
}

std::string call_in_group_text(const char* function, const std::string& queue,
                               const std::string& arguments) {
    Rows rows = call_in_group_rows(function, queue, arguments);
    if (rows.size() != 1 || rows.is_null(0, "r")) return {};
    // Any type, as its text (a jsonb is not stored as text).
    Datum value = rows.datum(0, "r");
    char* text = call([&] {
        Oid output;
        bool varlena;
        getTypeOutputInfo(SPI_gettypeid(rows.table()->tupdesc, 1), &output, &varlena);
        return OidOutputFunctionCall(output, value);
    });
    return text;
}

std::string int8_array_literal(const std::vector<int64>& ids) {
    std::string list;
    for (int64 id : ids) list += (list.empty() ? "" : ",") + std::to_string(id);
    return "ARRAY[" + list + "]::pg_catalog.int8[]";
}

PreparedStatement extension_schema(
    "SELECT pg_catalog.quote_ident(n.nspname) AS schema FROM pg_catalog.pg_extension e"
    "  JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_wf'", {});

std::string api_function(const char* name) {
    return extension_schema.execute().text_at(0, "schema") + "." + name;
}

BoundedLockWaits::BoundedLockWaits() : exceptions_(std::uncaught_exceptions()) {
    nest_level_ = call([] {
        pin_statement_settings();  // first: the function's level stays below this one
        int level = NewGUCNestLevel();
        set_config_option("lock_timeout", "1s", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0,
                          false);
        return level;
    });
}

BoundedLockWaits::~BoundedLockWaits() {
    if (std::uncaught_exceptions() != exceptions_) return;  // the abort restores it
    int level = nest_level_;
    try {
        call([&] { AtEOXact_GUC(true, level); });
    } catch (...) {
        // As in ThroughCitus: the transaction's end restores it then.
    }
}

void require_group_call_from_pg_wf(const char* function) {
    if (call([] { return superuser(); })) return;
    throw core::Error(core::sqlstate::insufficient_privilege,
                      std::string("permission denied for function ") + function,
                      "It is called by pg_wf itself, on a distributed pg_wf.");
}

}  // namespace wf::pg
