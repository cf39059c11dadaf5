// The claim's one write to a logged table, done by hand: an index scan of
// wf.ready in claim order and a heap delete per row taken. Through SQL, the
// same pick is `SELECT ... FOR UPDATE SKIP LOCKED` then `DELETE`, which
// writes each ready row twice (a lock record, then the delete) and costs a
// full executor start-up per claim. Here a row another transaction holds is
// seen by the delete itself (the tuple is being modified) and skipped at
// once, so no lock is needed: SKIP LOCKED's behaviour at half its WAL.
#include "pg/jobs/ready_set.hpp"

#include "pg/base/guard.hpp"

extern "C" {
#include "access/genam.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/pg_am.h"
#include "executor/executor.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"
}

namespace wf::pg {
namespace {

// wf.ready's columns (sql/pg_wf.sql), checked at every open so that a
// table altered by hand gives an error, never a misread datum.
constexpr AttrNumber kQueue = 1, kPriority = 2, kRunAt = 3, kId = 4;

[[noreturn]] void unexpected_ready_set(const char* what) {
    ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                    errmsg("pg_wf's ready set is not as its library expects: %s", what),
                    errhint("Reinstall the extension, or ALTER EXTENSION pg_wf UPDATE.")));
}

bool column_is(TupleDesc desc, AttrNumber attno, const char* name, Oid type) {
    if (desc->natts < attno) return false;
    Form_pg_attribute att = TupleDescAttr(desc, attno - 1);
    return !att->attisdropped && att->atttypid == type && strcmp(NameStr(att->attname), name) == 0;
}

// Opens wf.ready to delete from and its claim-order index to scan, with the
// checks the executor makes for a DELETE (read-only transactions,
// privileges, publications).
// Plain C: it runs inside call().
void open_ready_set(Relation* table, Relation* index) {
    // As the executor refuses a DELETE there (25006); on a hot standby,
    // where every transaction is read-only, too.
    PreventCommandIfReadOnly("wf_claim");
    Oid schema = get_namespace_oid("wf", false);
    Oid table_oid = get_relname_relid("ready", schema);
    Oid index_oid = get_relname_relid("ready_claim_order", schema);
    if (!OidIsValid(table_oid) || !OidIsValid(index_oid))
        unexpected_ready_set("wf.ready or its index wf.ready_claim_order is missing");
    const AclMode needed[] = {ACL_SELECT, ACL_DELETE};
    for (AclMode mode : needed) {
        AclResult acl = pg_class_aclcheck(table_oid, GetUserId(), mode);
        if (acl != ACLCHECK_OK) aclcheck_error(acl, OBJECT_TABLE, "ready");
    }
    *table = table_open(table_oid, RowExclusiveLock);
    *index = index_open(index_oid, RowExclusiveLock);
    TupleDesc desc = RelationGetDescr(*table);
    if (!column_is(desc, kQueue, "queue", TEXTOID) || !column_is(desc, kPriority, "priority", INT4OID) ||
        !column_is(desc, kRunAt, "run_at", TIMESTAMPTZOID) || !column_is(desc, kId, "id", INT8OID))
        unexpected_ready_set("wf.ready's columns differ from (queue, priority, run_at, id)");
    Form_pg_index form = (*index)->rd_index;
    if ((*index)->rd_rel->relam != BTREE_AM_OID || form->indrelid != table_oid ||
        form->indnkeyatts < 1 || form->indkey.values[0] != kQueue)
        unexpected_ready_set("wf.ready_claim_order is not a btree on (queue, ...)");
    CheckCmdReplicaIdentity(*table, CMD_DELETE);
}

// The scan itself; fills out[0 .. return value). Plain C, inside call().
int take_rows(Datum queue, TimestampTz now, int limit, ReadyRow* out) {
    Relation table, index;
    open_ready_set(&table, &index);
    // A new command id and snapshot, as SPI gives each statement: the rows
    // this transaction inserted are visible, and in READ COMMITTED so is
    // every commit up to now (a waiting claimer relies on that).
    CommandCounterIncrement();
    Snapshot snapshot = RegisterSnapshot(GetTransactionSnapshot());
    CommandId command = GetCurrentCommandId(true);

    ScanKeyData key;
    ScanKeyEntryInitialize(&key, 0, 1, BTEqualStrategyNumber, InvalidOid,
                           index->rd_indcollation[0], F_TEXTEQ, queue);
    IndexScanDesc scan = index_beginscan(table, index, snapshot, 1, 0);
    index_rescan(scan, &key, 1, nullptr, 0);
    TupleTableSlot* slot = table_slot_create(table, nullptr);

    int taken = 0;
    while (taken < limit && index_getnext_slot(scan, ForwardScanDirection, slot)) {
        bool isnull;
        TimestampTz run_at = DatumGetTimestampTz(slot_getattr(slot, kRunAt, &isnull));
        if (run_at > now) continue;  // scheduled later (the key orders by priority first)
        ReadyRow row{DatumGetInt64(slot_getattr(slot, kId, &isnull)),
                     DatumGetInt32(slot_getattr(slot, kPriority, &isnull)), run_at};
        TM_FailureData failure;
        TM_Result result = table_tuple_delete(table, &slot->tts_tid, command, snapshot,
                                              InvalidSnapshot, /*wait=*/false, &failure,
                                              /*changingPart=*/false);
        // Anything but TM_Ok: another transaction is deleting the row (its
        // claim or a cancel, still open: TM_BeingModified) or has deleted it
        // since the snapshot (TM_Deleted). Either way it is not ours.
        if (result == TM_Ok) out[taken++] = row;
    }

    ExecDropSingleTupleTableSlot(slot);
    index_endscan(scan);
    UnregisterSnapshot(snapshot);
    index_close(index, NoLock);
    table_close(table, NoLock);
    return taken;
}

}  // namespace

std::vector<ReadyRow> take_ready_rows(Datum queue, TimestampTz now, int limit) {
    std::vector<ReadyRow> rows(static_cast<size_t>(std::max(limit, 0)));
    ReadyRow* out = rows.data();
    int taken = call([&] { return take_rows(queue, now, limit, out); });
    rows.resize(static_cast<size_t>(taken));
    return rows;
}

}  // namespace wf::pg
