// The claim's one write to a logged table, done by hand: an index scan of
// wf.ready in claim order and a heap delete per row taken. Through SQL, the
// same pick is `SELECT ... FOR UPDATE SKIP LOCKED` then `DELETE`, which
// writes each ready row twice (a lock record, then the delete) and costs a
// full executor start-up per claim. Here a row another transaction holds is
// seen by the delete itself (the tuple is being modified) and skipped at
// once, so no lock is needed: SKIP LOCKED's behaviour at half its WAL.
#include "pg/jobs/ready_set.hpp"

#include "pg/base/guard.hpp"
#include "pg/citus/shard_route.hpp"
#include "pg/jobs/direct_table.hpp"

extern "C" {
#include "access/genam.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/skey.h"
#include "catalog/pg_am.h"
#include "catalog/pg_collation.h"
#include "executor/executor.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"
}

namespace wf::pg {
namespace {

// wf.ready's columns (sql/pg_wf.sql), checked at every open so that a
// table altered by hand gives an error, never a misread datum.
constexpr AttrNumber kQueue = 1, kPriority = 2, kRunAt = 3, kId = 4, kKey = 5, kVersion = 6;
const ExpectedColumn kReadyColumns[] = {{kQueue, "queue", TEXTOID},      {kPriority, "priority", INT4OID},
                                        {kRunAt, "run_at", TIMESTAMPTZOID}, {kId, "id", INT8OID},
                                        {kKey, "key", TEXTOID},          {kVersion, "version", TEXTOID}};

// Which of wf.ready's indexes a claim walks.
enum class ReadyIndex { claim_order, key_order, version_order };

// Opens wf.ready to delete from and one of its indexes to scan -- the
// claim order (queue, priority DESC, run_at, id), the key order (queue,
// key, ...) or the version order (queue, version, ...) -- with the checks
// the executor makes for a DELETE (direct_table.hpp). Plain C: it runs
// inside call().
void open_ready_set(ReadyIndex which, Relation* table, Relation* index) {
    bool by_key = which == ReadyIndex::key_order;
    bool by_version = which == ReadyIndex::version_order;
    // On a distributed pg_wf, the local shard of wf.ready (shard_route.hpp).
    ShardGroup* group = current_shard_group();
    open_hot_table("wf_claim", "ready",
                   by_key ? "ready_key_order" : by_version ? "ready_version_order" : "ready_claim_order",
                   group != nullptr ? group->ready_suffix.c_str() : "", kDelete, kReadyColumns,
                   lengthof(kReadyColumns), 1, table, index);
    // The key and version orders compare their second column as bytes.
    if ((by_key || by_version) &&
        ((*index)->rd_index->indnkeyatts < 2 ||
         (*index)->rd_index->indkey.values[1] != (by_key ? kKey : kVersion) ||
         (*index)->rd_indcollation[1] != C_COLLATION_OID))
        unexpected_table_shape("ready", by_key ? "ready_key_order is not a btree on (queue, key COLLATE \"C\", ...)"
                                               : "ready_version_order is not a btree on (queue, version COLLATE \"C\", ...)");
}

// An open ready set: the table, one index, and the snapshot and command id
// of one claim. Plain C: every member runs inside call().
struct OpenReadySet {
    Relation table;
    Relation index;
    Snapshot snapshot;
    CommandId command;

    void open(ReadyIndex which) {
        open_ready_set(which, &table, &index);
        // The rows this transaction inserted are visible, and in READ
        // COMMITTED so is every commit up to now (a waiting claimer relies
        // on that).
        begin_direct_statement(&snapshot, &command);
    }
    void close() {
        UnregisterSnapshot(snapshot);
        index_close(index, NoLock);
        table_close(table, NoLock);
    }

    // Deletes up to `limit` rows that match `keys`, are due at `now` and
    // (when `only_id` > 0) are job `only_id`'s, in index order; fills out.
    int take(ScanKeyData* keys, int nkeys, TimestampTz now, int limit, int64 only_id,
             ReadyRow* out) {
        IndexScanDesc scan = index_beginscan(table, index, snapshot, nkeys, 0);
        index_rescan(scan, keys, nkeys, nullptr, 0);
        TupleTableSlot* slot = table_slot_create(table, nullptr);
        int taken = 0;
        while (taken < limit && index_getnext_slot(scan, ForwardScanDirection, slot)) {
            bool isnull;
            TimestampTz run_at = DatumGetTimestampTz(slot_getattr(slot, kRunAt, &isnull));
            if (run_at > now) continue;  // scheduled later (the key orders by priority first)
            ReadyRow row{DatumGetInt64(slot_getattr(slot, kId, &isnull)),
                         DatumGetInt32(slot_getattr(slot, kPriority, &isnull)), run_at};
            if (only_id > 0 && row.id != only_id) continue;
            TM_FailureData failure;
            TM_Result result = table_tuple_delete(table, &slot->tts_tid, command, snapshot,
                                                  InvalidSnapshot, /*wait=*/false, &failure,
                                                  /*changingPart=*/false);
            // Anything but TM_Ok: another transaction is deleting the row
            // (its claim or a cancel, still open: TM_BeingModified), has
            // deleted it since the snapshot (TM_Deleted), or this claim took
            // it already (TM_SelfModified). Either way it is not to take.
            if (result == TM_Ok) out[taken++] = row;
        }
        ExecDropSingleTupleTableSlot(slot);
        index_endscan(scan);
        return taken;
    }

    // Deletes the row at `where`, as take() does; false if another
    // transaction has it.
    bool take_at(ItemPointerData* where) {
        TM_FailureData failure;
        return table_tuple_delete(table, where, command, snapshot, InvalidSnapshot, false,
                                  &failure, false) == TM_Ok;
    }

    // The key of the first row that matches `keys`; false if none.
    bool first_key(ScanKeyData* keys, int nkeys, bool* is_null, std::string* key) {
        IndexScanDesc scan = index_beginscan(table, index, snapshot, nkeys, 0);
        index_rescan(scan, keys, nkeys, nullptr, 0);
        TupleTableSlot* slot = table_slot_create(table, nullptr);
        bool found = index_getnext_slot(scan, ForwardScanDirection, slot);
        if (found) {
            Datum d = slot_getattr(slot, kKey, is_null);
            if (!*is_null) {
                text* t = DatumGetTextPP(d);
                key->assign(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
            }
        }
        ExecDropSingleTupleTableSlot(slot);
        index_endscan(scan);
        return found;
    }

    Oid collation(int column) const { return index->rd_indcollation[column]; }
};

void key_equals(ScanKeyData* key, AttrNumber column, Oid collation, RegProcedure op, Datum value) {
    ScanKeyEntryInitialize(key, 0, column, BTEqualStrategyNumber, InvalidOid, collation, op, value);
}

}  // namespace

std::vector<ReadyRow> take_ready_rows(Datum queue, TimestampTz now, int limit) {
    std::vector<ReadyRow> rows(static_cast<size_t>(std::max(limit, 0)));
    ReadyRow* out = rows.data();
    int taken = call([&] {
        OpenReadySet set;
        set.open(ReadyIndex::claim_order);
        ScanKeyData key;
        key_equals(&key, 1, set.collation(0), F_TEXTEQ, queue);
        int n = set.take(&key, 1, now, limit, 0, out);
        set.close();
        return n;
    });
    rows.resize(static_cast<size_t>(taken));
    return rows;
}

static bool claim_order_before(const ReadyRow& a, const ReadyRow& b) {
    if (a.priority != b.priority) return a.priority > b.priority;
    if (a.run_at != b.run_at) return a.run_at < b.run_at;
    return a.id < b.id;
}

std::vector<ReadyRow> take_ready_rows_of_versions(Datum queue, TimestampTz now, int limit,
                                                  const std::vector<Datum>& versions) {
    // One index scan per version, merged in claim order: the best due row
    // of all the scans is taken next (or skipped if another claim has it),
    // and its scan moves on. So a row another claim holds costs one step,
    // and every free row behind it is still reachable.
    size_t n = versions.size();
    std::vector<ScanKeyData> keys(2 * n);
    std::vector<IndexScanDesc> scans(n, nullptr);
    std::vector<TupleTableSlot*> slots(n, nullptr);
    std::vector<ReadyRow> heads(n);
    std::vector<char> has_head(n, 0);
    std::vector<ReadyRow> rows(static_cast<size_t>(std::max(limit, 0)));
    int taken = 0;
    OpenReadySet set;
    call([&] {
        set.open(ReadyIndex::version_order);
        auto advance = [&](size_t i) {
            has_head[i] = 0;
            while (index_getnext_slot(scans[i], ForwardScanDirection, slots[i])) {
                bool isnull;
                TimestampTz run_at = DatumGetTimestampTz(slot_getattr(slots[i], kRunAt, &isnull));
                if (run_at > now) continue;  // scheduled later
                heads[i] = ReadyRow{DatumGetInt64(slot_getattr(slots[i], kId, &isnull)),
                                    DatumGetInt32(slot_getattr(slots[i], kPriority, &isnull)), run_at};
                has_head[i] = 1;
                return;
            }
        };
        for (size_t i = 0; i < n; i++) {
            key_equals(&keys[2 * i], 1, set.collation(0), F_TEXTEQ, queue);
            key_equals(&keys[2 * i + 1], 2, set.collation(1), F_TEXTEQ, versions[i]);
            scans[i] = index_beginscan(set.table, set.index, set.snapshot, 2, 0);
            index_rescan(scans[i], &keys[2 * i], 2, nullptr, 0);
            slots[i] = table_slot_create(set.table, nullptr);
            advance(i);
        }
        while (taken < limit) {
            size_t best = n;
            for (size_t i = 0; i < n; i++)
                if (has_head[i] && (best == n || claim_order_before(heads[i], heads[best]))) best = i;
            if (best == n) break;
            if (set.take_at(&slots[best]->tts_tid)) rows[static_cast<size_t>(taken++)] = heads[best];
            advance(best);
        }
        for (size_t i = 0; i < n; i++) {
            ExecDropSingleTupleTableSlot(slots[i]);
            index_endscan(scans[i]);
        }
        set.close();
    });
    rows.resize(static_cast<size_t>(taken));
    return rows;
}

// ---- the ready set key by key ----

struct ReadySetByKey::Open : OpenReadySet {};

ReadySetByKey::ReadySetByKey(Datum queue) : queue_(queue), open_(std::make_unique<Open>()) {
    Open* set = open_.get();
    call([&] { set->open(ReadyIndex::key_order); });
}

// On an error the transaction's abort releases what is still open.
ReadySetByKey::~ReadySetByKey() = default;

void ReadySetByKey::close() {
    if (open_ && !closed_) call([&] { open_->close(); });
    closed_ = true;
}

std::optional<ReadyGroup> ReadySetByKey::next_group(const std::optional<ReadyGroup>& after) {
    if (after && after->is_null) return std::nullopt;  // the group without a key is last
    Open* set = open_.get();
    ReadyGroup found{};
    bool any = call([&] {
        ScanKeyData keys[2];
        key_equals(&keys[0], 1, set->collation(0), F_TEXTEQ, queue_);
        Datum after_key = 0;
        if (after) {
            after_key = PointerGetDatum(cstring_to_text_with_len(after->key.data(),
                                                                 static_cast<int>(after->key.size())));
            ScanKeyEntryInitialize(&keys[1], 0, 2, BTGreaterStrategyNumber, InvalidOid,
                                   set->collation(1), F_TEXT_GT, after_key);
        } else {
            ScanKeyEntryInitialize(&keys[1], SK_ISNULL | SK_SEARCHNOTNULL, 2, InvalidStrategy,
                                   InvalidOid, InvalidOid, InvalidOid, 0);
        }
        if (set->first_key(keys, 2, &found.is_null, &found.key)) return true;
        // Past the last key: the jobs without one, if any.
        ScanKeyEntryInitialize(&keys[1], SK_ISNULL | SK_SEARCHNULL, 2, InvalidStrategy, InvalidOid,
                               InvalidOid, InvalidOid, 0);
        found.key.clear();
        return set->first_key(keys, 2, &found.is_null, &found.key);
    });
    if (!any) return std::nullopt;
    return found;
}

int ReadySetByKey::take(const ReadyGroup& group, TimestampTz now, int limit,
                        const ReadyRow* exact, std::vector<ReadyRow>* out) {
    size_t before = out->size();
    out->resize(before + static_cast<size_t>(limit));
    ReadyRow* at = out->data() + before;
    Open* set = open_.get();
    int taken = call([&] {
        ScanKeyData keys[5];
        key_equals(&keys[0], 1, set->collation(0), F_TEXTEQ, queue_);
        if (group.is_null) {
            ScanKeyEntryInitialize(&keys[1], SK_ISNULL | SK_SEARCHNULL, 2, InvalidStrategy,
                                   InvalidOid, InvalidOid, InvalidOid, 0);
        } else {
            Datum key = PointerGetDatum(cstring_to_text_with_len(group.key.data(),
                                                                 static_cast<int>(group.key.size())));
            key_equals(&keys[1], 2, set->collation(1), F_TEXTEQ, key);
        }
        if (!exact) return set->take(keys, 2, now, limit, 0, at);
        // The whole key of wf.ready_key_order: (queue, key, priority, run_at, id).
        key_equals(&keys[2], 3, InvalidOid, F_INT4EQ, Int32GetDatum(exact->priority));
        key_equals(&keys[3], 4, InvalidOid, F_TIMESTAMPTZ_EQ, TimestampTzGetDatum(exact->run_at));
        key_equals(&keys[4], 5, InvalidOid, F_INT8EQ, Int64GetDatum(exact->id));
        return set->take(keys, 5, now, 1, exact->id, at);
    });
    out->resize(before + static_cast<size_t>(taken));
    return taken;
}

}  // namespace wf::pg
