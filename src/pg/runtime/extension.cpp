#include "pg/runtime/extension.hpp"
#include "pg/base/invalidation.hpp"

#include "core/error.hpp"
#include "pg/base/guard.hpp"
#include "pg/runtime/attachments.hpp"
#include "pg/runtime/shared_memory.hpp"
#include "pg/runtime/wakeup.hpp"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_namespace.h"
#include "utils/fmgroids.h"
#include "utils/syscache.h"
}

namespace wf::pg {
namespace {

enum class SchemaState { current, missing, older, newer, attached };

// Only `current` is kept: any other answer is read again at the next call
// (it is an error path, or a worker pass that does nothing).
bool known_current = false;
Oid known_owner = InvalidOid;  // of schema wf, while known_current
std::string attachment;  // what stopped pg_wf, for the message
bool callbacks_registered = false;

// The relations of schema wf, while known_current: an invalidation of any
// other relation (a VACUUM anywhere sends one) changes nothing here.
constexpr int kMaxWatched = 128;
Oid watched[kMaxWatched];
int watched_count = -1;  // -1: watch every relation

// An ALTER EXTENSION, DROP or CREATE EXTENSION changes pg_wf's relations
// (relcache invalidations) or functions (pg_proc invalidations);
// pg_extension itself has no syscache that could tell us. Attaching a
// trigger, a rule or row security invalidates the table's relcache entry.
// Runs inside invalidation processing: reads, no catalog access.
void forget_version(Datum, Oid relid) {
    bool ours = relid == InvalidOid || watched_count < 0 ||
                std::find(watched, watched + watched_count, relid) != watched + watched_count;
    if (ours) known_current = false;
}
void forget_version_on_syscache(Datum, int, uint32) { known_current = false; }

// "1.12" -> {1, 12}; anything unparsable sorts first.
std::pair<long, long> parse_version(const char* v) {
    char* end = nullptr;
    long major = std::strtol(v, &end, 10);
    long minor = (end && *end == '.') ? std::strtol(end + 1, nullptr, 10) : 0;
    return {major, minor};
}

// Plain C: runs inside call(). The version as palloc'd text, or nullptr.
char* installed_version() {
    Relation rel = table_open(ExtensionRelationId, AccessShareLock);
    ScanKeyData key;
    ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ,
                CStringGetDatum("pg_wf"));
    SysScanDesc scan = systable_beginscan(rel, ExtensionNameIndexId, true, nullptr, 1, &key);
    HeapTuple tuple = systable_getnext(scan);
    char* version = nullptr;
    if (HeapTupleIsValid(tuple)) {
        bool isnull = true;
        Datum d = heap_getattr(tuple, Anum_pg_extension_extversion, RelationGetDescr(rel), &isnull);
        if (!isnull) version = text_to_cstring(DatumGetTextPP(d));
    }
    systable_endscan(scan);
    table_close(rel, AccessShareLock);
    return version;
}


SchemaState read_schema_state() {
    if (!callbacks_registered) {
        call([] {
            listen_to_relcache(forget_version);
            CacheRegisterSyscacheCallback(PROCOID, forget_version_on_syscache, 0);
            // ALTER SCHEMA wf OWNER TO: who pg_wf runs as.
            CacheRegisterSyscacheCallback(NAMESPACEOID, forget_version_on_syscache, 0);
        });
        callbacks_registered = true;
    }
    if (known_current) return SchemaState::current;
    char* version = call([] { return installed_version(); });
    if (version == nullptr) return SchemaState::missing;
    auto v = parse_version(version);
    if (v < parse_version(WF_OLDEST_SCHEMA_VERSION)) return SchemaState::older;
    if (v > parse_version(WF_SCHEMA_VERSION)) return SchemaState::newer;
    const char* what = call([] { return find_attachment(watched, kMaxWatched, &watched_count); });
    if (what != nullptr) {
        attachment = what;
        return SchemaState::attached;
    }
    known_owner = call([] { return schema_owner(); });
    known_current = OidIsValid(known_owner);
    return known_current ? SchemaState::current : SchemaState::missing;
}

}  // namespace

Oid schema_owner() {
    Oid schema = get_namespace_oid("wf", true);
    if (!OidIsValid(schema)) return InvalidOid;
    HeapTuple tuple = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(schema));
    if (!HeapTupleIsValid(tuple)) return InvalidOid;
    Oid owner = reinterpret_cast<Form_pg_namespace>(GETSTRUCT(tuple))->nspowner;
    ReleaseSysCache(tuple);
    return owner;
}

Oid pg_wf_owner() {
    require_current_schema();
    return known_owner;
}

std::string schema_refusal() {
    switch (read_schema_state()) {
        case SchemaState::current: return {};
        case SchemaState::missing: return "pg_wf is not created in this database";
        case SchemaState::older: return "the extension's SQL objects are older than its library";
        case SchemaState::newer: return "the extension's SQL objects are newer than its library";
        case SchemaState::attached: return "pg_wf's tables have " + attachment + " attached";
    }
    return {};
}

bool schema_at_least(const char* version) {
    char* installed = call([] { return installed_version(); });
    bool at_least = installed != nullptr && parse_version(installed) >= parse_version(version);
    if (installed != nullptr) call([&] { pfree(installed); });
    return at_least;
}

void require_schema_at_least(const char* version, const char* what) {
    if (schema_at_least(version)) return;
    throw core::Error("55000", std::string(what) + " needs pg_wf's SQL objects at version " + version,
                      {}, "Run ALTER EXTENSION pg_wf UPDATE (on a distributed pg_wf: on the "
                          "coordinator, then SELECT wf_distribute()).");
}

void require_current_schema() {
    switch (read_schema_state()) {
        case SchemaState::current:
            return;
        case SchemaState::missing:
            throw core::Error("55000", "pg_wf is not created in this database", {},
                              "Run CREATE EXTENSION pg_wf.");
        case SchemaState::older:
            throw core::Error("55000",
                              "pg_wf's SQL objects in this database are older than its library",
                              "The library serves versions " WF_OLDEST_SCHEMA_VERSION
                              " to " WF_SCHEMA_VERSION " of the extension.",
                              "Run ALTER EXTENSION pg_wf UPDATE.");
        case SchemaState::newer:
            throw core::Error("55000",
                              "pg_wf's SQL objects in this database are newer than its library",
                              "The library serves versions " WF_OLDEST_SCHEMA_VERSION
                              " to " WF_SCHEMA_VERSION " of the extension.",
                              "Install the pg_wf library of the extension's version and "
                              "restart the server.");
        case SchemaState::attached:
            throw core::Error("55000", "pg_wf refuses to run: its tables have " + attachment,
                              "pg_wf's functions and its worker write these tables with pg_wf's "
                              "rights; what is attached to them would run with those rights.",
                              "Remove it (DROP TRIGGER, DROP RULE, ALTER TABLE ... DISABLE ROW "
                              "LEVEL SECURITY).");
    }
}

}  // namespace wf::pg

using namespace wf::pg;

// Run by CREATE EXTENSION: tells whether crash recovery is automatic here.
WF_SQL_FUNCTION_ANY_SCAN(wf_after_create) {
    if (!shared_memory_ready()) {
        // A WARNING: CREATE EXTENSION hides NOTICEs of its script.
        call([] {
            ereport(WARNING,
                    (errmsg("pg_wf is not in shared_preload_libraries: jobs of sessions that "
                            "die are recovered only when wf_sweep() is called"),
                     errhint("Add pg_wf to shared_preload_libraries and restart the server to "
                             "run the background worker and wake waiting claimers at once.")));
        });
    } else {
        wake_launcher_at_commit();
    }
    PG_RETURN_VOID();
}
