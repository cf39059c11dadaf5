#include "pg/jobs/direct_table.hpp"

#include "pg/base/invalidation.hpp"

extern "C" {
#include "access/genam.h"
#include "access/skey.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "commands/trigger.h"
#include "catalog/pg_am.h"
#include "executor/executor.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"
#include "lib/stringinfo.h"
#include "nodes/makefuncs.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "utils/syscache.h"
}

namespace wf::pg {

[[noreturn]] void unexpected_table_shape(const char* table, const char* what) {
    ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                    errmsg("pg_wf's table wf.%s is not as its library expects: %s", table, what),
                    errhint("Reinstall the extension, or ALTER EXTENSION pg_wf UPDATE.")));
}

namespace {
constexpr AttrNumber kKeyQueue = 1, kKeyId = 2;  // in wf.job and wf.claim
const ExpectedColumn kQueueIdKey[2] = {{kKeyQueue, "queue", TEXTOID}, {kKeyId, "id", INT8OID}};
}  // namespace

const ExpectedColumn kIdQueueKey[2] = {{kKeyId, "id", INT8OID}, {kKeyQueue, "queue", TEXTOID}};

namespace {
// The OIDs of relations of schema wf by name, as found last: every call
// opens three to five of them, and each lookup by name cost two catalog
// cache searches and a name formatted. Forgotten, all of them, at a
// relcache invalidation of any (a rename, a drop) and at any change to a
// schema (wf renamed or dropped): a name then leads where it leads now.
// Only names found are kept; up to 64 (a Citus node's shards may be more,
// and are looked up each time).
struct NamedRelation {
    char name[NAMEDATALEN];
    Oid oid;
};
constexpr int kNamedRelations = 64;
NamedRelation named[kNamedRelations];
int named_count = 0;
Oid wf_schema = InvalidOid;

void forget_names() {
    named_count = 0;
    wf_schema = InvalidOid;
}
void on_relcache_invalidation(Datum, Oid relid) {
    for (int i = 0; i < named_count; i++)
        if (!OidIsValid(relid) || named[i].oid == relid) return forget_names();
}
void on_namespace_invalidation(Datum, int, uint32) { forget_names(); }
}  // namespace

Oid wf_relation_oid(const char* name) {
    static bool listening = false;
    if (!listening) {
        listen_to_relcache(on_relcache_invalidation);
        CacheRegisterSyscacheCallback(NAMESPACEOID, on_namespace_invalidation, 0);
        listening = true;
    }
    for (int i = 0; i < named_count; i++)
        if (strcmp(named[i].name, name) == 0) return named[i].oid;
    if (!OidIsValid(wf_schema)) wf_schema = get_namespace_oid("wf", false);
    Oid oid = get_relname_relid(name, wf_schema);
    if (OidIsValid(oid) && named_count < kNamedRelations && strlen(name) < NAMEDATALEN) {
        strlcpy(named[named_count].name, name, NAMEDATALEN);
        named[named_count++].oid = oid;
    }
    return oid;
}

bool key_leads_with_queue(const char* index, const char* suffix) {
    char index_name[NAMEDATALEN];
    snprintf(index_name, sizeof index_name, "%s%s", index, suffix);
    Oid index_oid = wf_relation_oid(index_name);
    if (!OidIsValid(index_oid)) return false;
    HeapTuple tuple = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(index_oid));
    if (!HeapTupleIsValid(tuple)) return false;
    Form_pg_index form = reinterpret_cast<Form_pg_index>(GETSTRUCT(tuple));
    bool queue_first = form->indnkeyatts > 0 && form->indkey.values[0] == kKeyQueue;
    ReleaseSysCache(tuple);
    return queue_first;
}

const ExpectedColumn* job_key_columns(const char* index, const char* suffix) {
    return key_leads_with_queue(index, suffix) ? kQueueIdKey : kIdQueueKey;
}

void job_key_scan(Relation index, Datum queue, int64 id, ScanKeyData keys[2]) {
    bool queue_first = index->rd_index->indkey.values[0] == kKeyQueue;
    int queue_key = queue_first ? 0 : 1;
    ScanKeyEntryInitialize(&keys[queue_key], 0, queue_key + 1, BTEqualStrategyNumber, InvalidOid,
                           index->rd_indcollation[queue_key], F_TEXTEQ, queue);
    ScanKeyEntryInitialize(&keys[1 - queue_key], 0, 2 - queue_key, BTEqualStrategyNumber, InvalidOid,
                           InvalidOid, F_INT8EQ, Int64GetDatum(id));
}

void begin_direct_statement(Snapshot* snapshot, CommandId* command) {
    CommandCounterIncrement();
    *snapshot = RegisterSnapshot(GetTransactionSnapshot());
    *command = GetCurrentCommandId(true);
}

namespace {
// Where each column name was found last, by the name's address (the names
// are the callers' literals): a hint, checked against the table at each
// use, so that a call's opens compare one name per column instead of
// scanning the table's ~30 columns for each (a single enqueue looks up 24).
// A hint that no longer holds (another layout: an updated table, a shard
// of another version) is replaced by a scan.
struct ColumnHint {
    const char* name;
    AttrNumber at;
};
constexpr int kColumnHints = 256;  // a power of two, above the names in use
ColumnHint column_hints[kColumnHints];

ColumnHint& hint_for(const char* name) {
    uintptr_t key = reinterpret_cast<uintptr_t>(name);
    return column_hints[(key >> 3 ^ key >> 11) & (kColumnHints - 1)];
}

bool is_column(Form_pg_attribute att, const char* name) {
    return !att->attisdropped && strcmp(NameStr(att->attname), name) == 0;
}

// The column's number; 0 if there is none by that name, -1 if it has
// another type.
AttrNumber find_column(Relation table, const char* name, Oid type) {
    TupleDesc desc = RelationGetDescr(table);
    ColumnHint& hint = hint_for(name);
    if (hint.name == name && hint.at >= 1 && hint.at <= desc->natts) {
        Form_pg_attribute att = TupleDescAttr(desc, hint.at - 1);
        if (is_column(att, name)) return att->atttypid == type ? att->attnum : -1;
    }
    for (int i = 0; i < desc->natts; i++) {
        Form_pg_attribute att = TupleDescAttr(desc, i);
        if (!is_column(att, name)) continue;
        hint = {name, att->attnum};
        return att->atttypid == type ? att->attnum : -1;
    }
    return 0;
}
[[noreturn]] void no_such_column(Relation table, const char* name, Oid type) {
    unexpected_table_shape(RelationGetRelationName(table),
                           psprintf("it has no column \"%s\" of type %s", name, format_type_be(type)));
}
}  // namespace

AttrNumber column_number(Relation table, const char* name, Oid type) {
    AttrNumber at = find_column(table, name, type);
    if (at <= 0) no_such_column(table, name, type);
    return at;
}

AttrNumber column_number_if_any(Relation table, const char* name, Oid type) {
    AttrNumber at = find_column(table, name, type);
    if (at < 0) no_such_column(table, name, type);
    return at;
}

void open_hot_table(const char* function, const char* table, const char* index, const char* suffix,
                    int writes, const ExpectedColumn* columns, int ncolumns, int index_keys,
                    Relation* table_out, Relation* index_out) {
    // As the executor refuses a write there (25006); on a hot standby,
    // where every transaction is read-only, too.
    PreventCommandIfReadOnly(function);
    char table_name[NAMEDATALEN];
    char index_name[NAMEDATALEN];
    snprintf(table_name, sizeof table_name, "%s%s", table, suffix);
    snprintf(index_name, sizeof index_name, "%s%s", index, suffix);
    Oid table_oid = wf_relation_oid(table_name);
    Oid index_oid = wf_relation_oid(index_name);
    if (!OidIsValid(table_oid) || !OidIsValid(index_oid))
        unexpected_table_shape(table, "the table or its index is missing");
    // Each right on its own: pg_class_aclcheck accepts any one of a mask.
    const struct {
        bool wanted;
        AclMode mode;
    } needed[] = {{true, ACL_SELECT},
                  {(writes & kDelete) != 0, ACL_DELETE},
                  {(writes & kInsert) != 0, ACL_INSERT},
                  {(writes & kUpdate) != 0, ACL_UPDATE}};
    for (const auto& right : needed) {
        if (!right.wanted) continue;
        AclResult acl = pg_class_aclcheck(table_oid, GetUserId(), right.mode);
        if (acl != ACLCHECK_OK) aclcheck_error(acl, OBJECT_TABLE, table);
    }
    LOCKMODE lock = writes == kReadOnly ? AccessShareLock : RowExclusiveLock;
    *table_out = table_open(table_oid, lock);
    *index_out = index_open(index_oid, lock);
    TupleDesc desc = RelationGetDescr(*table_out);
    for (int c = 0; c < ncolumns; c++) {
        const ExpectedColumn& col = columns[c];
        Form_pg_attribute att = desc->natts >= col.number ? TupleDescAttr(desc, col.number - 1) : nullptr;
        if (att == nullptr || att->attisdropped || att->atttypid != col.type ||
            strcmp(NameStr(att->attname), col.name) != 0)
            unexpected_table_shape(table, psprintf("column %d is not \"%s\" of type %s", col.number,
                                                   col.name, format_type_be(col.type)));
    }
    Form_pg_index form = (*index_out)->rd_index;
    bool index_as_expected = (*index_out)->rd_rel->relam == BTREE_AM_OID &&
                             form->indrelid == table_oid && form->indnkeyatts >= index_keys;
    for (int k = 0; index_as_expected && k < index_keys; k++)
        index_as_expected = form->indkey.values[k] == columns[k].number;
    if (!index_as_expected) {
        StringInfoData keys;
        initStringInfo(&keys);
        for (int k = 0; k < index_keys; k++) appendStringInfo(&keys, "%s, ", columns[k].name);
        unexpected_table_shape(table, psprintf("%s is not a btree on (%s...)", index, keys.data));
    }
    // What the executor would run or apply and this code does not: nothing
    // may be attached to pg_wf's tables (runtime/attachments.hpp), and what
    // is there anyway is refused here too.
    TriggerDesc* t = (*table_out)->trigdesc;
    if (t != nullptr &&
        (((writes & kUpdate) && (t->trig_update_before_row || t->trig_update_after_row ||
                                 t->trig_update_before_statement || t->trig_update_after_statement)) ||
         ((writes & kDelete) && (t->trig_delete_before_row || t->trig_delete_after_row ||
                                 t->trig_delete_before_statement || t->trig_delete_after_statement)) ||
         ((writes & kInsert) && (t->trig_insert_before_row || t->trig_insert_after_row ||
                                 t->trig_insert_before_statement || t->trig_insert_after_statement))))
        unexpected_table_shape(table, "it has a trigger");
    if ((*table_out)->rd_rel->relhasrules) unexpected_table_shape(table, "it has a rule");
    if (check_enable_rls(table_oid, InvalidOid, true) == RLS_ENABLED)
        unexpected_table_shape(table, "row level security applies to it");
    // A row written by hand is formed whole, with no constraint or default
    // evaluated: what the executor would check or compute is refused.
    TupleConstr* constraints = RelationGetDescr(*table_out)->constr;
    if ((writes & (kInsert | kUpdate)) && constraints != nullptr) {
        if (constraints->num_check > 0) unexpected_table_shape(table, "it has a CHECK constraint");
        if (constraints->has_generated_stored) unexpected_table_shape(table, "it has a generated column");
    }
    if (writes & kUpdate) CheckCmdReplicaIdentity(*table_out, CMD_UPDATE);
    if (writes & kDelete) CheckCmdReplicaIdentity(*table_out, CMD_DELETE);
}

bool text_is(Datum value, const char* expected) {
    text* t = DatumGetTextPP(value);
    size_t length = strlen(expected);
    return VARSIZE_ANY_EXHDR(t) == length && memcmp(VARDATA_ANY(t), expected, length) == 0;
}

bool same_text(Datum a, Datum b) {
    text* x = DatumGetTextPP(a);
    text* y = DatumGetTextPP(b);
    return VARSIZE_ANY_EXHDR(x) == VARSIZE_ANY_EXHDR(y) &&
           memcmp(VARDATA_ANY(x), VARDATA_ANY(y), VARSIZE_ANY_EXHDR(x)) == 0;
}

void require_only_columns(Relation table, const char* const* names, int count) {
    TupleDesc desc = RelationGetDescr(table);
    for (int i = 0; i < desc->natts; i++) {
        Form_pg_attribute att = TupleDescAttr(desc, i);
        if (att->attisdropped) continue;
        // `names` are in a fresh install's order: the same place first.
        bool known = i < count && strcmp(NameStr(att->attname), names[i]) == 0;
        for (int n = 0; n < count && !known; n++) known = strcmp(NameStr(att->attname), names[n]) == 0;
        if (!known)
            unexpected_table_shape(RelationGetRelationName(table),
                                   psprintf("it has a column \"%s\" pg_wf does not write",
                                            NameStr(att->attname)));
    }
}

void require_not_null(Relation table, const bool* nulls) {
    TupleDesc desc = RelationGetDescr(table);
    if (desc->constr == nullptr || !desc->constr->has_not_null) return;
    for (int i = 0; i < desc->natts; i++) {
        Form_pg_attribute att = TupleDescAttr(desc, i);
        if (att->attnotnull && nulls[i])
            ereport(ERROR, (errcode(ERRCODE_NOT_NULL_VIOLATION),
                            errmsg("null value in column \"%s\" of relation \"%s\" violates not-null constraint",
                                   NameStr(att->attname), RelationGetRelationName(table)),
                            errtable(table)));
    }
}

}  // namespace wf::pg
