// A batch's claims deleted by hand (claim_table.hpp): a point lookup in
// claim_pkey and a heap delete per claim, with the executor's checks made
// once for the batch (direct_table.hpp).
#include "pg/jobs/claim_table.hpp"

#include "pg/base/guard.hpp"
#include "pg/citus/shard_route.hpp"
#include "pg/jobs/direct_table.hpp"

extern "C" {
#include "access/genam.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/skey.h"
#include "access/xact.h"
#include "executor/tuptable.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
}

namespace wf::pg {
namespace {

constexpr AttrNumber kQueue = 1, kId = 2;
const ExpectedColumn kClaimColumns[] = {{kQueue, "queue", TEXTOID}, {kId, "id", INT8OID}};

// Where claim (queue, id) is, as `snapshot` sees it; false if it sees none.
bool find_claim(Relation table, Relation index, Snapshot snapshot, Datum queue, int64 id,
                TupleTableSlot* slot) {
    ScanKeyData keys[2];
    ScanKeyEntryInitialize(&keys[0], 0, 1, BTEqualStrategyNumber, InvalidOid,
                           index->rd_indcollation[0], F_TEXTEQ, queue);
    ScanKeyEntryInitialize(&keys[1], 0, 2, BTEqualStrategyNumber, InvalidOid, InvalidOid, F_INT8EQ,
                           Int64GetDatum(id));
    IndexScanDesc scan = index_beginscan(table, index, snapshot, 2, 0);
    index_rescan(scan, keys, 2, nullptr, 0);
    bool found = index_getnext_slot(scan, ForwardScanDirection, slot);
    index_endscan(scan);
    return found;
}

// Deletes claim (queue, id). Plain C: runs inside call().
void end_claim(Relation table, Relation index, Snapshot snapshot, CommandId command, Datum queue,
               int64 id, TupleTableSlot* slot) {
    Snapshot latest = nullptr;
    for (;;) {
        if (!find_claim(table, index, latest ? latest : snapshot, queue, id, slot)) break;
        TM_FailureData failure;
        TM_Result result = table_tuple_delete(table, &slot->tts_tid, command,
                                              latest ? latest : snapshot, InvalidSnapshot,
                                              /*wait=*/true, &failure, /*changingPart=*/false);
        if (result == TM_Ok || result == TM_SelfModified) break;
        if (result != TM_Updated && result != TM_Deleted)
            elog(ERROR, "unexpected table_tuple_delete status: %d", static_cast<int>(result));
        // As the executor: a transaction snapshot cannot see past it.
        if (IsolationUsesXactSnapshot())
            ereport(ERROR, (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
                            errmsg("could not serialize access due to concurrent %s",
                                   result == TM_Updated ? "update" : "delete")));
        if (result == TM_Deleted) break;  // gone already (the reaper's orphan sweep)
        // A lease renewal committed a new version: delete that one, as the
        // executor's EvalPlanQual would in READ COMMITTED.
        if (latest) UnregisterSnapshot(latest);
        latest = RegisterSnapshot(GetLatestSnapshot());
    }
    if (latest) UnregisterSnapshot(latest);
}

}  // namespace

void end_claims(Datum queue, const std::vector<int64>& ids) {
    if (ids.empty()) return;
    const int64* id = ids.data();
    size_t count = ids.size();
    call([&] {
        ShardGroup* group = current_shard_group();
        Relation table;
        Relation index;
        open_hot_table("wf_complete", "claim", "claim_pkey",
                       group != nullptr ? group->claim_suffix.c_str() : "", CMD_DELETE,
                       kClaimColumns, lengthof(kClaimColumns), &table, &index);
        if (index->rd_index->indnkeyatts < 2 || index->rd_index->indkey.values[1] != kId)
            unexpected_table_shape("claim", "claim_pkey is not a btree on (queue, id)");
        // As SPI gives each statement: the transaction's own writes are seen.
        CommandCounterIncrement();
        Snapshot snapshot = RegisterSnapshot(GetTransactionSnapshot());
        CommandId command = GetCurrentCommandId(true);
        TupleTableSlot* slot = table_slot_create(table, nullptr);
        for (size_t i = 0; i < count; i++)
            end_claim(table, index, snapshot, command, queue, id[i], slot);
        ExecDropSingleTupleTableSlot(slot);
        UnregisterSnapshot(snapshot);
        index_close(index, NoLock);
        table_close(table, NoLock);
    });
}

}  // namespace wf::pg
