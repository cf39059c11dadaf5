#include "pg/api/rights.hpp"
#include "pg/base/invalidation.hpp"
#include "pg/base/statement_settings.hpp"
#include "pg/citus/cluster_calls.hpp"
#include "pg/citus/shard_route.hpp"

#include <unordered_map>

#include "core/error.hpp"
#include "core/validation.hpp"
#include "pg/api/frame.hpp"

extern "C" {
#include "utils/acl.h"
#include "utils/syscache.h"
}

namespace wf::pg {
namespace {

constexpr const char* kNames[] = {"produce", "work", "signal", "operate", "observe", "administer"};
constexpr int kCapabilities = 6;

// The functions each capability opens (administer: all of them), by name:
// wf_grant gives EXECUTE on them, wf_revoke takes it back.
const char* const kFunctions[kCapabilities] = {
    "{wf_enqueue,wf_enqueue_batch,wf_submit,wf_signal_with_start,wf_wait_job,wf_wait_workflow}",
    "{wf_claim,wf_complete_and_claim,wf_heartbeat,wf_complete,wf_complete_many,wf_fail,"
    "wf_checkpoint,wf_snooze,wf_await_event,wf_start_child,wf_await_children,"
    "wf_complete_with_steps,wf_progress}",
    "{wf_signal}",
    "{wf_retry,wf_cancel,wf_cancel_workflow,wf_workflow,wf_wait_job,wf_wait_workflow,"
    "wf_retry_where,wf_cancel_where}",
    "{wf_workflow}",
    "{wf_configure_queue,wf_schedule,wf_unschedule,wf_sweep,wf_recover_lost_claims,"
    "wf_grant,wf_revoke,wf_enqueue,wf_enqueue_batch,wf_submit,wf_claim,wf_complete_and_claim,"
    "wf_heartbeat,wf_complete,wf_complete_many,wf_fail,wf_checkpoint,wf_snooze,wf_await_event,"
    "wf_signal,wf_retry,wf_cancel,wf_cancel_workflow,wf_workflow,wf_signal_with_start,"
    "wf_wait_job,wf_wait_workflow,wf_start_child,wf_await_children,wf_complete_with_steps,"
    "wf_progress,wf_retry_where,wf_cancel_where,wf_enable_schedule}",
};

// Whether role $1 holds $2 (NULL: any capability), or administer, on queue
// $3: a grant to it or to a role whose rights it has, for that name or a
// pattern matching it.
PreparedStatement lookup_right(
    "SELECT EXISTS (SELECT 1 FROM wf.grant g"
    "  WHERE ($2::text IS NULL OR g.capability IN ($2, 'administer'))"
    "    AND (g.queues = $3 OR (right(g.queues, 1) = '*'"
    "                           AND starts_with($3, left(g.queues, -1))))"
    "    AND pg_has_role($1, g.grantee, 'USAGE')) AS held",
    {OIDOID, TEXTOID, TEXTOID});

// On a distributed pg_wf: by the grantee's name (its OID in this node's
// copy of wf.grant may be another node's).
PreparedStatement lookup_right_by_name(
    "SELECT EXISTS (SELECT 1 FROM wf.grant g"
    "  WHERE ($2::text IS NULL OR g.capability IN ($2, 'administer'))"
    "    AND (g.queues = $3 OR (right(g.queues, 1) = '*'"
    "                           AND starts_with($3, left(g.queues, -1))))"
    "    AND EXISTS (SELECT 1 FROM pg_roles r WHERE r.rolname = g.grantee_name"
    "                   AND pg_has_role($1, r.oid, 'USAGE'))) AS held",
    {OIDOID, TEXTOID, TEXTOID});

// On a distributed pg_wf, a check made by a client's own backend off the
// shard groups (wf_signal, wf_schedule, wf_sweep, a view's rows read on
// the coordinator) reads the
// matching grants through Citus, then the caller's memberships here:
// Citus would plan the one statement above as pg_wf's owner, who may not
// read pg_authid behind pg_roles.
PreparedStatement member_of_any(
    "SELECT EXISTS (SELECT 1 FROM pg_roles r WHERE r.rolname = ANY ($2)"
    "                  AND pg_has_role($1, r.oid, 'USAGE')) AS held",
    {OIDOID, TEXTARRAYOID});

bool has_right_on_cluster(Oid role, std::optional<Capability> capability, std::string_view queue) {
    std::string q = sql_literal(queue);
    Rows grants = run_through_citus(
        "SELECT DISTINCT g.grantee_name FROM wf.grant g WHERE " +
        (capability ? "g.capability IN (" + sql_literal(capability_name(*capability)) + ", 'administer')"
                    : std::string("true")) +
        " AND (g.queues = " + q + " OR (pg_catalog.right(g.queues, 1) = '*'"
        " AND pg_catalog.starts_with(" + q + ", pg_catalog.left(g.queues, -1))))");
    if (grants.empty()) return false;
    std::vector<Datum> names;
    for (uint64 r = 0; r < grants.size(); r++) names.push_back(text_datum(grants.text_at(r, "grantee_name")));
    Params<2> p;
    p.set(0, ObjectIdGetDatum(role));
    p.set(1, datum_array(names, std::vector<bool>(names.size(), false), TEXTOID));
    return member_of_any.execute(p.values, p.nulls).bool_at(0, "held");
}

PreparedStatement insert_grant(
    "INSERT INTO wf.grant (grantee, capability, queues, granted_by, grantee_name)"
    " VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
    {OIDOID, TEXTOID, TEXTOID, OIDOID, TEXTOID});

// Grants and revokes take turns: two GRANT EXECUTE on the same function at
// once fail ("tuple concurrently updated"), and the EXECUTE a revoke takes
// back depends on the grants it sees.
PreparedStatement serialize_grants("LOCK TABLE wf.grant IN SHARE ROW EXCLUSIVE MODE", {});

PreparedStatement delete_grant(
    "DELETE FROM wf.grant WHERE grantee = $1 AND capability = $2 AND queues = $3",
    {OIDOID, TEXTOID, TEXTOID});
// On a distributed pg_wf, every node's copy, by name.
PreparedStatement delete_grant_by_name(
    "DELETE FROM wf.grant WHERE grantee_name = $4 AND capability = $2 AND queues = $3"
    "   AND $1 IS NOT NULL",
    {OIDOID, TEXTOID, TEXTOID, TEXTOID});

// pg_wf's functions named in $1 (its members, whatever schema they are in),
// and whether role $2 still holds a grant that opens each ($3: the
// capabilities that open them, besides administer).
PreparedStatement functions_of(
    "SELECT p.oid::regprocedure::text AS signature,"
    "       EXISTS (SELECT 1 FROM wf.grant g WHERE g.grantee = $2"
    "                  AND (g.capability = ANY ($3::text[]) OR g.capability = 'administer'))"
    "         AS still_needed"
    "  FROM pg_proc p"
    "  JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'"
    "  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'pg_wf'"
    " WHERE p.proname = ANY ($1::text[])"
    " ORDER BY 1",
    {TEXTOID, OIDOID, TEXTOID});

// The names in kFunctions[c].
std::vector<std::string> function_names(Capability c) {
    std::string list = kFunctions[static_cast<int>(c)];
    std::vector<std::string> names;
    std::string name;
    for (char ch : list) {
        if (ch == '{') continue;
        if (ch == ',' || ch == '}') {
            names.push_back(name);
            name.clear();
        } else {
            name += ch;
        }
    }
    return names;
}

// The capabilities (besides administer) that open a function, as a text[]
// literal: wf_wait_job is opened by produce and by operate.
std::string capabilities_opening(const std::string& function) {
    std::string list;
    for (int c = 0; c < kCapabilities - 1; c++)
        for (const std::string& name : function_names(static_cast<Capability>(c)))
            if (name == function)
                list += (list.empty() ? "" : ",") + std::string(capability_name(static_cast<Capability>(c)));
    return "{" + list + "}";
}

std::unordered_map<std::string, bool> cache;
bool callbacks_registered = false;
Oid grant_relid = InvalidOid;  // wf.grant, once looked up

// wf_grant and wf_revoke invalidate wf.grant's relcache entry; an
// invalidation of any other relation (a VACUUM anywhere) changes no right.
void forget_rights(Datum, Oid relid) {
    if (relid != InvalidOid && grant_relid != InvalidOid && relid != grant_relid) return;
    cache.clear();
    grant_relid = InvalidOid;
}
void forget_rights_on_syscache(Datum, int, uint32) { cache.clear(); }

std::string cache_key(Oid role, std::optional<Capability> capability, std::string_view queue) {
    std::string key = std::to_string(role) + "/" +
                      (capability ? capability_name(*capability) : "any") + "/";
    key.append(queue.data(), queue.size());
    return key;
}

// Superusers and pg_wf's owner, or a cached answer: no statement needed.
std::optional<bool> known_right(Oid role, std::optional<Capability> capability,
                                std::string_view queue) {
    bool privileged = call([&] { return superuser_arg(role); });
    if (privileged || role == pg_wf_owner()) return true;
    if (!callbacks_registered) {
        call([] {
            // GRANT/REVOKE of role membership and ALTER ROLE change rights too.
            listen_to_relcache(forget_rights);
            CacheRegisterSyscacheCallback(AUTHMEMROLEMEM, forget_rights_on_syscache, 0);
            CacheRegisterSyscacheCallback(AUTHOID, forget_rights_on_syscache, 0);
        });
        callbacks_registered = true;
    }
    if (!OidIsValid(grant_relid)) {
        // Answers are kept only while an invalidation can reach them.
        cache.clear();
        grant_relid = call([] { return get_relname_relid("grant", get_namespace_oid("wf", false)); });
        return std::nullopt;
    }
    if (auto it = cache.find(cache_key(role, capability, queue)); it != cache.end())
        return it->second;
    return std::nullopt;
}

void forget_all_rights() {
    Oid grants = call([] { return get_relname_relid("grant", get_namespace_oid("wf", false)); });
    if (OidIsValid(grants)) call([&] { CacheInvalidateRelcacheByRelid(grants); });
}

// Runs a GRANT or REVOKE that pg_wf's owner may run (it owns the objects).
void run_utility(const std::string& sql) {
    int rc = call([&] {
        pin_statement_settings();
        return SPI_execute(sql.c_str(), false, 0);
    });
    if (rc != SPI_OK_UTILITY) throw std::runtime_error("pg_wf: " + sql + " failed");
}

struct GrantArgs {
    Oid role;
    Capability capability;
    std::string_view queues;
    std::string role_name;
};

GrantArgs grant_args(FunctionCallInfo fcinfo) {
    core::require_not_null(PG_ARGISNULL(0), "role");
    GrantArgs args;
    args.role = PG_GETARG_OID(0);
    std::string_view name = text_arg(fcinfo, 1, "capability");
    std::optional<Capability> capability = capability_from_name(name);
    if (!capability)
        throw core::Error(core::sqlstate::invalid_parameter,
                          "capability \"" + std::string(name) + "\" does not exist",
                          {}, "Capabilities are produce, work, signal, operate, observe and administer.");
    args.capability = *capability;
    args.queues = text_arg(fcinfo, 2, "queues");
    core::validate_queue_name(args.queues);
    const char* role_name = call([&] { return GetUserNameFromId(args.role, true); });
    if (role_name == nullptr)
        throw core::Error("42704", "role with OID " + std::to_string(args.role) + " does not exist");
    args.role_name = role_name;
    return args;
}

// The key of a grant, parameters $1..$3: (grantee, capability, queues).
template <int N>
Params<N> grant_key(const GrantArgs& args) {
    Params<N> p;
    p.set(0, ObjectIdGetDatum(args.role));
    p.set(1, text_datum(capability_name(args.capability)));
    p.set(2, text_datum(args.queues));
    return p;
}

}  // namespace

const char* capability_name(Capability c) { return kNames[static_cast<int>(c)]; }

std::optional<Capability> capability_from_name(std::string_view name) {
    for (int i = 0; i < kCapabilities; i++)
        if (name == kNames[i]) return static_cast<Capability>(i);
    return std::nullopt;
}

bool has_right(Oid role, std::optional<Capability> capability, std::string_view queue) {
    if (std::optional<bool> known = known_right(role, capability, queue)) return *known;
    Params<3> p;
    p.set(0, ObjectIdGetDatum(role));
    p.set_or_null(1, !capability, capability ? text_datum(capability_name(*capability)) : 0);
    p.set(2, text_datum(queue));
    if (distributed() && current_shard_group() == nullptr && !delegated_by_citus())
        return has_right_on_cluster(role, capability, queue);
    Rows rows = (distributed() ? lookup_right_by_name : lookup_right).execute(p.values, p.nulls);
    bool held = rows.bool_at(0, "held");
    rows.free();
    // On a distributed pg_wf a grant changes the copies of wf.grant on
    // every node, and no invalidation reaches this node's cache: no cache.
    if (distributed()) return held;
    constexpr size_t kMaxCached = 4096;
    if (cache.size() >= kMaxCached) cache.clear();
    cache.emplace(cache_key(role, capability, queue), held);
    return held;
}

void require_right(Capability capability, std::string_view queue) {
    Oid caller = RunAsOwner::caller();
    if (has_right(caller, capability, queue)) return;
    const char* role = call([&] { return GetUserNameFromId(caller, false); });
    bool is_event = capability == Capability::signal;
    throw core::Error(core::sqlstate::insufficient_privilege,
                      std::string("permission denied to ") + capability_name(capability) +
                          (is_event ? " event \"" : " in queue \"") + std::string(queue) + "\"",
                      std::string("Role \"") + role + "\" holds no " + capability_name(capability) +
                          " right on it.",
                      std::string("An administrator of the queue can grant it: SELECT wf_grant('") +
                          role + "', '" + capability_name(capability) + "', '" +
                          std::string(queue) + "').");
}

}  // namespace wf::pg

using namespace wf;
using namespace wf::pg;

namespace {
// Whether the reader of a view (GetUserId(): views run functions as their
// reader) holds `capability` (none: any) on the queue in argument 0.
// Called once per row: superusers and cached answers need no statement.
bool reader_holds(FunctionCallInfo fcinfo, std::optional<Capability> capability) {
    if (PG_ARGISNULL(0)) return false;
    return reader_holds_right(capability, text_arg(fcinfo, 0, "queue"));
}
}  // namespace

bool wf::pg::reader_holds_right(std::optional<Capability> capability, std::string_view queue) {
    Oid reader = GetUserId();
    if (std::optional<bool> known = known_right(reader, capability, queue)) return *known;
    return with_job_tables_anywhere([&] { return has_right(reader, capability, queue); });
}

// wf._visible(queue) -> boolean: whether the reader holds any right on it.
WF_SQL_FUNCTION_ANY_SCAN(wf_visible) { PG_RETURN_BOOL(reader_holds(fcinfo, std::nullopt)); }

// wf._administers(queues) -> boolean: whether the reader administers them.
WF_SQL_FUNCTION_ANY_SCAN(wf_administers) { PG_RETURN_BOOL(reader_holds(fcinfo, Capability::administer)); }

// with_job_tables for wf_grant and wf_revoke. On a distributed pg_wf they
// write wf.grant's copies on every node and GRANT EXECUTE there, through
// Citus, which connects to the other nodes as the current role: so only a
// superuser may, and the statements run as that superuser (pg_wf's owner
// cannot log in).
template <typename Body>
decltype(auto) with_grant_tables(Body&& body) {
    bool as_caller = with_spi([] { return distributed(); });
    if (!as_caller) return with_job_tables(std::forward<Body>(body));
    if (!call([] { return superuser(); }))
        throw core::Error(core::sqlstate::insufficient_privilege,
                          "on a distributed pg_wf, rights are granted and revoked by a superuser",
                          "Citus writes the grant on every node as the role that makes it.");
    // The checks with_job_tables makes (the schema's version, nothing
    // attached to pg_wf's tables), then the coordinator's own.
    (void)pg_wf_owner();
    return with_spi([&]() -> decltype(auto) {
        require_coordinator("wf_grant and wf_revoke");
        return body();
    });
}

// wf_grant(role, capability, queues) -> boolean: true if the grant is new.
WF_SQL_FUNCTION_ANY_SCAN(wf_grant) {
    GrantArgs args = grant_args(fcinfo);
    bool added = with_grant_tables([&] {
        require_right(Capability::administer, args.queues);
        serialize_grants.execute();
        Params<5> p = grant_key<5>(args);
        p.set(3, ObjectIdGetDatum(RunAsOwner::caller()));
        p.set(4, text_datum(args.role_name));
        bool is_new = insert_grant.execute(p.values, p.nulls).size() == 1;
        Params<3> f;
        f.set(0, text_datum(kFunctions[static_cast<int>(args.capability)]));
        f.set(1, ObjectIdGetDatum(args.role));
        f.set(2, text_datum(std::string("{") + capability_name(args.capability) + "}"));
        Rows functions = functions_of.execute(f.values, f.nulls);
        std::vector<std::string> signatures;
        for (uint64 r = 0; r < functions.size(); r++)
            signatures.push_back(functions.text_at(r, "signature"));
        std::string role = call([&] { return quote_identifier(args.role_name.c_str()); });
        for (const std::string& signature : signatures)
            run_utility("GRANT EXECUTE ON FUNCTION " + signature + " TO " + role);
        forget_all_rights();
        return is_new;
    });
    PG_RETURN_BOOL(added);
}

// wf_revoke(role, capability, queues) -> boolean: true if there was such a
// grant. EXECUTE on a function goes when no grant of the role opens it.
WF_SQL_FUNCTION_ANY_SCAN(wf_revoke) {
    GrantArgs args = grant_args(fcinfo);
    bool removed = with_grant_tables([&] {
        require_right(Capability::administer, args.queues);
        serialize_grants.execute();
        Params<4> p = grant_key<4>(args);
        p.set(3, text_datum(args.role_name));
        bool was = (distributed() ? delete_grant_by_name : delete_grant).execute(p.values, p.nulls).size() >= 1;
        // Each function the revoked capability opened goes, unless another
        // grant of the role opens it too (its own capability, or administer).
        std::string role = call([&] { return quote_identifier(args.role_name.c_str()); });
        for (const std::string& name : function_names(args.capability)) {
            Params<3> f;
            f.set(0, text_datum("{" + name + "}"));
            f.set(1, ObjectIdGetDatum(args.role));
            f.set(2, text_datum(capabilities_opening(name)));
            Rows functions = functions_of.execute(f.values, f.nulls);
            if (functions.size() == 1 && !functions.bool_at(0, "still_needed"))
                run_utility("REVOKE EXECUTE ON FUNCTION " + functions.text_at(0, "signature") +
                            " FROM " + role);
        }
        forget_all_rights();
        return was;
    });
    PG_RETURN_BOOL(removed);
}
