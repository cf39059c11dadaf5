// Claims read and deleted by hand (claim_table.hpp): a point lookup in
// claim_pkey and, to end one, a heap delete, with the executor's checks
// made once per call (direct_table.hpp).
#include "pg/jobs/claim_table.hpp"

#include "pg/base/guard.hpp"
#include "pg/citus/shard_route.hpp"
#include "pg/jobs/direct_table.hpp"

extern "C" {
#include "access/genam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "executor/tuptable.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
}

namespace wf::pg {
namespace {

// wf.claim's key (sql/pg_wf.sql); its other columns are found by name.
constexpr AttrNumber kQueue = 1, kId = 2;
const ExpectedColumn kClaimColumns[] = {{kQueue, "queue", TEXTOID}, {kId, "id", INT8OID}};

// Where claim (queue, id) is at the latest snapshot, in claims.slot; false
// if there is none.
bool find_latest_claim(const ClaimTable& claims, int64 id) {
    ScanKeyData keys[2];
    queue_id_keys(claims.index, claims.queue, id, keys);
    Snapshot latest = RegisterSnapshot(GetLatestSnapshot());
    IndexScanDesc scan = index_beginscan(claims.table, claims.index, latest, 2, 0);
    index_rescan(scan, keys, 2, nullptr, 0);
    bool found = index_getnext_slot(scan, ForwardScanDirection, claims.slot);
    index_endscan(scan);
    UnregisterSnapshot(latest);
    return found;
}

}  // namespace

void ClaimTable::open(Datum queue_text, const char* function) {
    queue = queue_text;
    ShardGroup* group = current_shard_group();
    open_hot_table(function, "claim", "claim_pkey", group != nullptr ? group->claim_suffix.c_str() : "",
                   CMD_DELETE, kClaimColumns, lengthof(kClaimColumns), 2, &table, &index);
    attempt_at = column_number(table, "attempt", INT4OID);
    worker_at = column_number(table, "worker", TEXTOID);
    started_at_at = column_number(table, "started_at", TIMESTAMPTZOID);
    progress_at = column_number(table, "progress", JSONBOID);
    begin_direct_statement(&snapshot, &command);
    scan = index_beginscan(table, index, snapshot, 2, 0);
    slot = table_slot_create(table, nullptr);
}

void ClaimTable::close() {
    ExecDropSingleTupleTableSlot(slot);
    index_endscan(scan);
    UnregisterSnapshot(snapshot);
    index_close(index, NoLock);
    table_close(table, NoLock);
}

bool ClaimTable::read(int64 id, ClaimRead* out, MemoryContext copies) {
    ScanKeyData keys[2];
    queue_id_keys(index, queue, id, keys);
    index_rescan(scan, keys, 2, nullptr, 0);
    if (!index_getnext_slot(scan, ForwardScanDirection, slot)) return false;
    bool isnull;
    out->attempt = DatumGetInt32(slot_getattr(slot, attempt_at, &isnull));
    out->started_at = slot_getattr(slot, started_at_at, &out->started_at_null);
    out->worker = slot_getattr(slot, worker_at, &out->worker_null);
    out->progress = slot_getattr(slot, progress_at, &out->progress_null);
    // The slot is reused by the next lookup: what is kept is copied.
    MemoryContext outer = MemoryContextSwitchTo(copies);
    if (!out->worker_null) out->worker = PointerGetDatum(PG_DETOAST_DATUM_COPY(out->worker));
    if (!out->progress_null) out->progress = PointerGetDatum(PG_DETOAST_DATUM_COPY(out->progress));
    MemoryContextSwitchTo(outer);
    return true;
}

void ClaimTable::end_read(int64 id) {
    // The version read() found first; then, while a committed renewal
    // moves it on, the latest one.
    for (bool latest = false;; latest = true) {
        if (latest && !find_latest_claim(*this, id)) break;
        TM_FailureData failure;
        TM_Result result = table_tuple_delete(table, &slot->tts_tid, command,
                                              latest ? GetLatestSnapshot() : snapshot,
                                              InvalidSnapshot, /*wait=*/true, &failure,
                                              /*changingPart=*/false);
        if (result == TM_Ok || result == TM_SelfModified) break;
        if (result != TM_Updated && result != TM_Deleted)
            elog(ERROR, "unexpected table_tuple_delete status: %d", static_cast<int>(result));
        // As the executor: a transaction snapshot cannot see past it.
        if (IsolationUsesXactSnapshot())
            ereport(ERROR, (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
                            errmsg("could not serialize access due to concurrent %s",
                                   result == TM_Updated ? "update" : "delete")));
        if (result == TM_Deleted) break;  // gone already (the reaper's orphan sweep)
    }
}

}  // namespace wf::pg
