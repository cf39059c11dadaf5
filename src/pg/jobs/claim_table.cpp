// Claims begun, read and ended by hand (claim_table.hpp): a point lookup
// in claim_pkey, a heap insert with the executor's index maintenance, or a
// heap delete, with the executor's checks made once per call
// (direct_table.hpp).
#include "pg/jobs/claim_table.hpp"

#include "pg/base/guard.hpp"
#include "pg/citus/shard_route.hpp"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "executor/tuptable.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
}

namespace wf::pg {
namespace {

// wf.claim's key, claim_pkey, is (id, queue) or, before 1.11, (queue, id)
// (direct_table.hpp); its other columns are found by name.
constexpr AttrNumber kQueue = 1, kId = 2;
// Every column a new claim row sets (in any order: updates add columns last).
const char* const kClaimColumnNames[] = {"queue",   "id",         "attempt", "owner_session",
                                         "lease",   "lease_expires_at", "worker", "owner_pid",
                                         "started_at", "key",     "run_deadline", "progress"};

// Where claim (queue, id) is at the latest snapshot, in claims.slot; false
// if there is none.
bool find_latest_claim(const ClaimTable& claims, int64 id) {
    ScanKeyData keys[2];
    job_key_scan(claims.index, claims.queue, id, keys);
    Snapshot latest = RegisterSnapshot(GetLatestSnapshot());
    IndexScanDesc scan = index_beginscan(claims.table, claims.index, latest, 2, 0);
    index_rescan(scan, keys, 2, nullptr, 0);
    bool found = index_getnext_slot(scan, ForwardScanDirection, claims.slot);
    index_endscan(scan);
    UnregisterSnapshot(latest);
    return found;
}

}  // namespace

void ClaimTable::open(Datum queue_text, const char* function, int writes) {
    queue = queue_text;
    entries.init();
    ShardGroup* group = current_shard_group();
    const char* suffix = group != nullptr ? group->claim_suffix.c_str() : "";
    open_hot_table(function, "claim", "claim_pkey", suffix, writes, job_key_columns("claim_pkey", suffix), 2,
                   2, &table, &index);
    if (writes & kInsert) require_only_columns(table, kClaimColumnNames, lengthof(kClaimColumnNames));
    attempt_at = column_number(table, "attempt", INT4OID);
    owner_session_at = column_number(table, "owner_session", INT8OID);
    lease_at = column_number(table, "lease", INTERVALOID);
    lease_expires_at_at = column_number(table, "lease_expires_at", TIMESTAMPTZOID);
    worker_at = column_number(table, "worker", TEXTOID);
    owner_pid_at = column_number(table, "owner_pid", INT4OID);
    started_at_at = column_number(table, "started_at", TIMESTAMPTZOID);
    key_at = column_number(table, "key", TEXTOID);
    run_deadline_at = column_number(table, "run_deadline", TIMESTAMPTZOID);
    progress_at = column_number(table, "progress", JSONBOID);
    begin_direct_statement(&snapshot, &command);
    scan = index_beginscan(table, index, snapshot, 2, 0);
    slot = table_slot_create(table, nullptr);
    written = MakeSingleTupleTableSlot(RelationGetDescr(table), &TTSOpsHeapTuple);
}

void ClaimTable::close() {
    entries.close();
    ExecDropSingleTupleTableSlot(written);
    ExecDropSingleTupleTableSlot(slot);
    index_endscan(scan);
    UnregisterSnapshot(snapshot);
    index_close(index, NoLock);
    table_close(table, NoLock);
}

bool ClaimTable::read(int64 id, ClaimRead* out, MemoryContext copies) {
    ScanKeyData keys[2];
    job_key_scan(index, queue, id, keys);
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

template <typename StillWanted>
bool ClaimTable::delete_found(int64 id, StillWanted still_wanted) {
    // The version found first; then, while a committed change moves it
    // on, the latest one.
    for (bool latest = false;; latest = true) {
        if (latest) {
            if (!find_latest_claim(*this, id)) return true;
            if (!still_wanted()) return false;
        }
        TM_FailureData failure;
        TM_Result result = table_tuple_delete(table, &slot->tts_tid, command,
                                              latest ? GetLatestSnapshot() : snapshot,
                                              InvalidSnapshot, /*wait=*/true, &failure,
                                              /*changingPart=*/false);
        if (result == TM_Ok || result == TM_SelfModified) return true;
        if (result != TM_Updated && result != TM_Deleted)
            elog(ERROR, "unexpected table_tuple_delete status: %d", static_cast<int>(result));
        // As the executor: a transaction snapshot cannot see past it.
        if (IsolationUsesXactSnapshot())
            ereport(ERROR, (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
                            errmsg("could not serialize access due to concurrent %s",
                                   result == TM_Updated ? "update" : "delete")));
        if (result == TM_Deleted) return true;  // gone already (the reaper's orphan sweep)
    }
}

void ClaimTable::end_read(int64 id) {
    delete_found(id, [] { return true; });
}

bool ClaimTable::begin(const NewClaim& claim, MemoryContext row_context) {
    ScanKeyData keys[2];
    job_key_scan(index, queue, claim.id, keys);
    index_rescan(scan, keys, 2, nullptr, 0);
    if (index_getnext_slot(scan, ForwardScanDirection, slot)) {
        // A row an earlier attempt left behind is replaced (ON CONFLICT's
        // DO UPDATE ... WHERE attempt < the new one, as SQL had it).
        auto older = [&] {
            bool isnull;
            return DatumGetInt32(slot_getattr(slot, attempt_at, &isnull)) < claim.attempt;
        };
        if (!older() || !delete_found(claim.id, older)) return false;
    }
    TupleDesc desc = RelationGetDescr(table);
    MemoryContext outer = MemoryContextSwitchTo(row_context);
    // Every column is set below (require_only_columns), dropped ones aside.
    Datum* values = static_cast<Datum*>(palloc0(desc->natts * sizeof(Datum)));
    bool* nulls = static_cast<bool*>(palloc(desc->natts * sizeof(bool)));
    memset(nulls, true, desc->natts * sizeof(bool));
    auto set = [&](AttrNumber at, Datum value, bool is_null) {
        values[at - 1] = value;
        nulls[at - 1] = is_null;
    };
    set(kQueue, queue, false);
    set(kId, Int64GetDatum(claim.id), false);
    set(attempt_at, Int32GetDatum(claim.attempt), false);
    set(owner_session_at, Int64GetDatum(claim.owner_session), false);
    set(lease_at, PointerGetDatum(claim.lease), claim.lease == nullptr);
    set(lease_expires_at_at, claim.lease_expires_at, claim.lease_expires_at_null);
    set(worker_at, claim.worker, false);
    set(owner_pid_at, Int32GetDatum(claim.owner_pid), false);
    set(started_at_at, claim.started_at, false);
    set(key_at, claim.key, claim.key_null);
    set(run_deadline_at, claim.run_deadline, claim.run_deadline_null);
    require_not_null(table, nulls);
    HeapTuple tuple = heap_form_tuple(desc, values, nulls);
    MemoryContextSwitchTo(outer);
    ExecStoreHeapTuple(tuple, written, true);
    table_tuple_insert(table, written, command, 0, nullptr);
    // claim_pkey's unique check is the executor's: a row of this job no
    // snapshot saw yet (none should be) is waited for, then refused (23505).
    entries.insert(table, written, /*update=*/false, snapshot, command);
    ExecClearTuple(written);
    return true;
}

}  // namespace wf::pg
