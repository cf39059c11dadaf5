// wf_distribute(): pg_wf's tables and functions handed to Citus, on the
// coordinator, once (calling it again finishes what is missing and changes
// nothing else). What it builds is described in shard_route.hpp.
#include "core/error.hpp"
#include "pg/base/statement_settings.hpp"
#include "pg/base/spi.hpp"
#include "pg/citus/cluster_calls.hpp"
#include "pg/citus/shard_route.hpp"
#include "pg/jobs/key_order.hpp"
#include "pg/runtime/extension.hpp"

namespace wf::pg {
namespace {

// Distributed by queue, colocated: everything about one queue's jobs (and
// the dependency edges, by the child's queue). The first one sets up the
// colocation group.
struct ByQueue {
    const char* table;
    const char* column;
};
const ByQueue kByQueue[] = {{"queue_config", "queue"},     {"job", "queue"},
                            {"ready", "queue"},            {"claim", "queue"},
                            {"checkpoint", "queue"},       {"dedup", "queue"},
                            {"ordered_group", "queue"},    {"event_wait", "queue"},
                            {"dependency", "child_queue"}, {"release_debt", "child_queue"}};
// Since 1.8: dependencies between shard groups (remote_dependencies.hpp).
const ByQueue kByQueueSince18[] = {{"remote_dependent", "parent_queue"},
                                   {"remote_input", "child_queue"}};
// A copy on every node: what is not one queue's.
const char* const kReplicated[] = {"workflow", "workflow_key", "child", "event", "schedule", "grant"};
// The functions addressed by queue (their first argument): Citus sends each
// call to the node holding that queue's shard, inside a transaction block
// too (force_delegation).
const char* const kByQueueFunctions[] = {
    "wf_enqueue(text, jsonb, timestamptz, int, int, text, uuid, text, bigint[], text, text, text, "
    "interval, timestamptz, text)",
    "wf_enqueue_batch(text, jsonb, text[])",
    "wf_claim(text, text, int, interval, interval, text[])",
    "wf_complete_and_claim(text, bigint, int, jsonb, text, int, interval, text[])",
    "wf_heartbeat(text, bigint, int, interval)",
    "wf_complete(text, bigint, int, jsonb)",
    "wf_complete_many(text, bigint[], int[], jsonb[])",
    "wf_fail(text, bigint, int, text, interval, boolean)",
    "wf_retry(text, bigint)",
    "wf_cancel(text, bigint)",
    "wf_retry_where(text, bigint[], text, int)",
    "wf_cancel_where(text, bigint[], text, text[], int)",
    "wf_checkpoint(text, bigint, int, text, jsonb)",
    "wf_snooze(text, bigint, int, interval)",
    "wf_await_event(text, bigint, int, text, interval)",
    "wf_progress(text, bigint, int, jsonb)",
    "wf_wait_job(text, bigint, interval)",
    "wf_configure_queue(text, int, interval, interval, interval, int, boolean, int, interval, int, "
    "int, boolean, boolean, interval, text)",
};

// Delegated from 1.9 (child workflows on a distributed pg_wf).
const char* const kByQueueFunctionsSince19[] = {"wf_await_children(text, bigint, int, interval)"};

// pg_wf's own calls into one shard group (1.8, cluster_calls.hpp),
// addressed by a queue of the group like the functions above.
const char* const kGroupFunctions[] = {
    "wf._wake_event(text, text, jsonb)",
    "wf._fire_tick(text, jsonb, timestamptz, text)",
    "wf._sweep_group(text)",
    "wf._subscribe(text, bigint, text, bigint)",
    "wf._parent_ended(text, bigint, text, jsonb, text, bigint[])",
    "wf._take_dependents(text, bigint)",
    "wf._insert_steps(text, uuid, jsonb, text)",
    "wf._cancel_workflow(text, uuid)",
    "wf._recover_lost_claims(text)",
};
const char* const kGroupFunctionsSince19[] = {"wf._deliver_child(text, bigint, uuid, text, jsonb)",
                                              "wf._cancel_child(text, uuid)"};

// The EXECUTE rights wf_grant gave before pg_wf was distributed, given
// again: on a distributed function Citus gives them on every node too.
PreparedStatement execute_grants(
    "SELECT pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %I', p.oid::regprocedure, r.rolname)"
    "       AS ddl"
    "  FROM pg_catalog.pg_proc p"
    "  JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_proc'::regclass AND d.objid = p.oid"
    "   AND d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.deptype = 'e'"
    "  JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid AND e.extname = 'pg_wf',"
    "       LATERAL pg_catalog.aclexplode(p.proacl) a"
    "  JOIN pg_catalog.pg_roles r ON r.oid = a.grantee"
    " WHERE a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner", {});
// Before wf.grant is copied to every node: its names are the roles' names
// now (a distributed pg_wf checks rights by name), and grants of roles that
// are gone go (a role created later with the name would get them).
PreparedStatement refresh_grantee_names(
    "WITH renamed AS (UPDATE wf.grant g SET grantee_name = r.rolname FROM pg_catalog.pg_roles r"
    "                  WHERE r.oid = g.grantee AND g.grantee_name <> r.rolname)"
    " DELETE FROM wf.grant g WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r"
    "                                           WHERE r.oid = g.grantee)", {});
PreparedStatement is_distributed(
    "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = $1::regclass)"
    " AS done", {TEXTOID});
PreparedStatement distribute_by_queue(
    "SELECT pg_catalog.create_distributed_table($1::regclass, $3, colocate_with => $2)",
    {TEXTOID, TEXTOID, TEXTOID});
PreparedStatement replicate("SELECT pg_catalog.create_reference_table($1::regclass)", {TEXTOID});
PreparedStatement delegate_by_queue(
    "SELECT pg_catalog.create_distributed_function($1::regprocedure, 'queue',"
    "       colocate_with => 'wf.queue_config', force_delegation => true)", {TEXTOID});
// Each node hands out job ids from a range of its own (take_id_range),
// and its launcher is woken: Citus created pg_wf on the workers in a
// prepared transaction, whose COMMIT PREPARED wakes no launcher.
PreparedStatement on_every_node(
    "SELECT n.nodename || ':' || n.nodeport AS node, r.success, r.result"
    "  FROM pg_catalog.run_command_on_all_nodes("
    "         'SELECT wf._take_id_range(); SELECT wf._after_create()') r"
    "  JOIN pg_catalog.pg_dist_node n ON n.nodeid = r.nodeid", {});

// A statement of pg_wf's own text (GRANT, ALTER SEQUENCE), run as it is.
void run_ddl(const std::string& sql) {
    int rc = call([&] {
        pin_statement_settings();
        return SPI_execute(sql.c_str(), false, 0);
    });
    if (rc < 0) throw std::runtime_error(SPI_result_code_string(rc));
}

bool is_distributed_text(const std::string& table) {
    Params<1> p;
    p.set(0, text_datum(table));
    return is_distributed.execute(p.values, p.nulls).bool_at(0, "done");
}

void distribute_all() {
    require_coordinator("wf_distribute()");
    if (schema_at_least("1.10") && !is_distributed_text("wf.ready")) every_ready_row_into_key_order();
    for (const ByQueue& t : kByQueue) {
        std::string name = std::string("wf.") + t.table;
        if (is_distributed_text(name)) continue;
        Params<3> p;
        p.set(0, text_datum(name));
        p.set(1, text_datum(&t == &kByQueue[0] ? "none" : "wf.queue_config"));
        p.set(2, text_datum(t.column));
        distribute_by_queue.execute(p.values, p.nulls);
    }
    if (schema_at_least("1.8"))
        for (const ByQueue& t : kByQueueSince18) {
            std::string name = std::string("wf.") + t.table;
            if (is_distributed_text(name)) continue;
            Params<3> p;
            p.set(0, text_datum(name));
            p.set(1, text_datum("wf.queue_config"));
            p.set(2, text_datum(t.column));
            distribute_by_queue.execute(p.values, p.nulls);
        }
    if (!is_distributed_text("wf.grant")) refresh_grantee_names.execute();
    for (const char* table : kReplicated) {
        std::string name = std::string("wf.") + table;
        if (is_distributed_text(name)) continue;
        Params<1> p;
        p.set(0, text_datum(name));
        replicate.execute(p.values, p.nulls);
    }
    // The wf_* functions live in the schema CREATE EXTENSION put them in.
    for (const char* function : kByQueueFunctions) {
        Params<1> p;
        p.set(0, text_datum(api_function(function)));
        delegate_by_queue.execute(p.values, p.nulls);
    }
    if (schema_at_least("1.8"))
        for (const char* function : kGroupFunctions) {
            Params<1> p;
            p.set(0, text_datum(function));
            delegate_by_queue.execute(p.values, p.nulls);
        }
    if (schema_at_least("1.9")) {
        for (const char* function : kByQueueFunctionsSince19) {
            Params<1> p;
            p.set(0, text_datum(api_function(function)));
            delegate_by_queue.execute(p.values, p.nulls);
        }
        for (const char* function : kGroupFunctionsSince19) {
            Params<1> p;
            p.set(0, text_datum(function));
            delegate_by_queue.execute(p.values, p.nulls);
        }
    }
    std::vector<std::string> grants;
    Rows granted = execute_grants.execute();
    for (uint64 r = 0; r < granted.size(); r++) grants.push_back(granted.text_at(r, "ddl"));
    for (const std::string& grant : grants) run_ddl(grant);
    Rows ranges = on_every_node.execute();
    for (uint64 r = 0; r < ranges.size(); r++)
        if (!ranges.bool_at(r, "success"))
            throw core::Error("55000",
                              "could not set the job id range of node " + ranges.text_at(r, "node"),
                              ranges.text_at(r, "result"));
}

// Node group g hands out job ids from g * 2^48 + 1 to (g + 1) * 2^48 - 1
// (the coordinator, group 0, keeps the ids it handed out before), so ids
// are unique across the cluster. The statement that sets it, or NULL when
// it is set.
PreparedStatement id_range_ddl(
    "SELECT CASE WHEN s.seqmin <> r.low OR s.seqmax <> r.high THEN"
    "         pg_catalog.format('ALTER SEQUENCE wf.job_id_seq MINVALUE %s MAXVALUE %s START WITH %s RESTART WITH %s',"
    "                           r.low, r.high, r.low, greatest(r.low, CASE WHEN q.last_value BETWEEN r.low AND r.high"
    "                                                          THEN q.last_value + 1 END)) END AS ddl"
    "  FROM (SELECT (groupid::bigint << 48) + 1 AS low, ((groupid::bigint + 1) << 48) - 1 AS high"
    "          FROM pg_catalog.pg_dist_local_group) r,"
    "       pg_catalog.pg_sequence s, wf.job_id_seq q"
    " WHERE s.seqrelid = 'wf.job_id_seq'::regclass", {});
PreparedStatement no_ddl_propagation(
    "SELECT pg_catalog.set_config('citus.enable_ddl_propagation', 'off', true)", {});

void take_id_range() {
    Rows rows = id_range_ddl.execute();
    if (rows.is_null(0, "ddl")) return;
    std::string ddl = rows.text_at(0, "ddl");
    // Not Citus's DDL: each node sets its own sequence.
    no_ddl_propagation.execute();
    run_ddl(ddl);
}

}  // namespace
}  // namespace wf::pg

using namespace wf::pg;

namespace {
void require_citus() {
    if (!wf::pg::call([] { return OidIsValid(get_extension_oid("citus", true)); }))
        throw wf::core::Error("0A000", "Citus is not installed in this database",
                              "wf_distribute() hands pg_wf's tables to Citus.",
                              "CREATE EXTENSION citus (with citus in shared_preload_libraries), "
                              "add the worker nodes, then call wf_distribute() again.");
}
}  // namespace

// wf_distribute() -> void
WF_SQL_FUNCTION_ANY_SCAN(wf_distribute) {
    require_citus();
    if (!call([] { return superuser(); }))
        throw wf::core::Error(wf::core::sqlstate::insufficient_privilege,
                              "only a superuser may distribute pg_wf");
    // What every pg_wf function checks first: a schema this library serves,
    // nothing attached to its tables (Citus would copy it to every shard).
    (void)pg_wf_owner();
    with_spi([] { distribute_all(); });
    PG_RETURN_VOID();
}

// wf._take_id_range() -> void: run on every node by wf_distribute().
WF_SQL_FUNCTION_ANY_SCAN(wf_take_id_range) {
    require_citus();
    if (!call([] { return superuser(); }))
        throw wf::core::Error(wf::core::sqlstate::insufficient_privilege,
                              "only a superuser may set pg_wf's job id range");
    with_spi([] { take_id_range(); });
    PG_RETURN_VOID();
}
