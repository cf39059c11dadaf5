#include "pg/runtime/attachments.hpp"

#include "pg/base/guard.hpp"
#include "pg/runtime/extension.hpp"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/pg_class.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_policy.h"
#include "catalog/pg_rewrite.h"
#include "catalog/pg_trigger.h"
#include "commands/event_trigger.h"
#include "nodes/parsenodes.h"
#include "utils/acl.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"
#include "utils/syscache.h"
}

namespace wf::pg {
namespace {

// Plain C: whether the relation `rv` names is in schema wf.
bool names_wf_relation(RangeVar* rv) {
    if (rv == nullptr) return false;
    Oid schema = get_namespace_oid("wf", true);
    if (!OidIsValid(schema)) return false;
    if (rv->schemaname != nullptr) return strcmp(rv->schemaname, "wf") == 0;
    Oid relid = RangeVarGetRelid(rv, NoLock, true);
    return OidIsValid(relid) && get_rel_namespace(relid) == schema;
}

// The ALTER TABLE subcommands that attach code or policies, or enable what
// was attached disabled, or hand the table to another owner. Handing it to
// pg_wf's own owner is not: Citus does that to every shard it creates.
bool attaches(AlterTableStmt* stmt) {
    ListCell* cell;
    foreach (cell, stmt->cmds) {
        AlterTableCmd* cmd = static_cast<AlterTableCmd*>(lfirst(cell));
        switch (cmd->subtype) {
            case AT_EnableRowSecurity:
            case AT_ForceRowSecurity:
            case AT_EnableTrig:
            case AT_EnableAlwaysTrig:
            case AT_EnableReplicaTrig:
            case AT_EnableTrigAll:
            case AT_EnableTrigUser:
            case AT_EnableRule:
            case AT_EnableAlwaysRule:
            case AT_EnableReplicaRule:
                return true;
            case AT_ChangeOwner:
                if (get_rolespec_oid(cmd->newowner, true) != schema_owner()) return true;
                break;
            default:
                break;
        }
    }
    return false;
}

// Plain C: the relation a statement would attach something to, or nullptr.
RangeVar* attachment_target(Node* tree) {
    switch (nodeTag(tree)) {
        case T_CreateTrigStmt:
            return reinterpret_cast<CreateTrigStmt*>(tree)->relation;
        case T_RuleStmt:
            return reinterpret_cast<RuleStmt*>(tree)->relation;
        case T_CreatePolicyStmt:
            return reinterpret_cast<CreatePolicyStmt*>(tree)->table;
        case T_AlterPolicyStmt:
            return reinterpret_cast<AlterPolicyStmt*>(tree)->table;
        case T_AlterTableStmt: {
            AlterTableStmt* stmt = reinterpret_cast<AlterTableStmt*>(tree);
            return attaches(stmt) ? stmt->relation : nullptr;
        }
        default:
            return nullptr;
    }
}

// Plain C: refuses the statement of an event trigger call.
void refuse_attachment(FunctionCallInfo fcinfo) {
    if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
        ereport(ERROR, (errcode(ERRCODE_E_R_I_E_EVENT_TRIGGER_PROTOCOL_VIOLATED),
                        errmsg("wf_refuse_attachment() runs only as an event trigger")));
    // pg_wf's own install and update scripts change its tables.
    if (creating_extension) return;
    EventTriggerData* data = reinterpret_cast<EventTriggerData*>(fcinfo->context);
    RangeVar* target = attachment_target(data->parsetree);
    if (!names_wf_relation(target)) return;
    ereport(ERROR,
            (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
             errmsg("pg_wf's tables take no triggers, rules, row security or new owners"),
             errdetail("%s on wf.%s was refused: pg_wf's functions and its worker write these "
                       "tables with pg_wf's rights, and what is attached to them would run "
                       "with those rights.",
                       GetCommandTagName(data->tag), target->relname),
             errhint("Read pg_wf's tables through its views and functions.")));
}

char found[NAMEDATALEN * 3 + 64];

// Plain C: whether catalog `catalog` has a row for relation `relid` in the
// first key column of `index` (that is not an internal trigger).
bool has_row_for(Oid catalog, Oid index, AttrNumber column, Oid relid, bool skip_internal) {
    Relation rel = table_open(catalog, AccessShareLock);
    ScanKeyData key;
    ScanKeyInit(&key, column, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
    SysScanDesc scan = systable_beginscan(rel, index, true, nullptr, 1, &key);
    bool any = false;
    HeapTuple tuple;
    while (!any && HeapTupleIsValid(tuple = systable_getnext(scan)))
        any = !(skip_internal && reinterpret_cast<Form_pg_trigger>(GETSTRUCT(tuple))->tgisinternal);
    systable_endscan(scan);
    table_close(rel, AccessShareLock);
    return any;
}

}  // namespace

const char* find_attachment(Oid* relations, int capacity, int* count) {
    *count = 0;
    Oid schema = get_namespace_oid("wf", true);
    if (!OidIsValid(schema)) return nullptr;
    // Every table of the schema: row security, triggers, rules. (The flags
    // relhastriggers and relhasrules can outlive what they flag: the
    // catalogs themselves say.)
    Relation classes = table_open(RelationRelationId, AccessShareLock);
    ScanKeyData key;
    ScanKeyInit(&key, Anum_pg_class_relnamespace, BTEqualStrategyNumber, F_OIDEQ,
                ObjectIdGetDatum(schema));
    SysScanDesc scan = systable_beginscan(classes, InvalidOid, false, nullptr, 1, &key);
    const char* what = nullptr;
    HeapTuple tuple;
    while (what == nullptr && HeapTupleIsValid(tuple = systable_getnext(scan))) {
        Form_pg_class rel = reinterpret_cast<Form_pg_class>(GETSTRUCT(tuple));
        if (*count >= 0 && *count < capacity)
            relations[(*count)++] = rel->oid;
        else
            *count = -1;
        if (rel->relkind != RELKIND_RELATION && rel->relkind != RELKIND_PARTITIONED_TABLE) continue;
        const char* kind = nullptr;
        if (rel->relrowsecurity)
            kind = "row security";
        else if (rel->relhastriggers &&
                 has_row_for(TriggerRelationId, TriggerRelidNameIndexId, Anum_pg_trigger_tgrelid,
                             rel->oid, true))
            kind = "a trigger";
        else if (rel->relhasrules &&
                 has_row_for(RewriteRelationId, RewriteRelRulenameIndexId,
                             Anum_pg_rewrite_ev_class, rel->oid, false))
            kind = "a rule";
        if (kind) {
            snprintf(found, sizeof found, "%s on wf.%s", kind, NameStr(rel->relname));
            what = found;
        }
    }
    systable_endscan(scan);
    table_close(classes, AccessShareLock);
    return what;
}

}  // namespace wf::pg

using namespace wf::pg;

// wf._refuse_attachment(): the event trigger behind wf_guard (pg_wf.sql).
WF_SQL_FUNCTION_ANY_SCAN(wf_refuse_attachment) {
    call([&] { refuse_attachment(fcinfo); });
    PG_RETURN_VOID();
}
