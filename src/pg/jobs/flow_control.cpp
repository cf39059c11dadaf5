// Flow control inside the claim (see flow_control.hpp).
#include "pg/jobs/flow_control.hpp"

#include <map>
#include <unordered_map>

#include "pg/base/advisory_locks.hpp"
#include "pg/jobs/job_state.hpp"

extern "C" {
#include "storage/lmgr.h"
}

namespace wf::pg {
namespace {

// A claim that found a key held by another claim tries again this soon.
constexpr long kKeyHeldRetryMs = 10;

// A key's running jobs, read under its lock with the latest snapshot.
PreparedStatement count_key_running(
    "SELECT count(*) AS running FROM wf.claim c JOIN wf.job j ON j.queue = $1 AND j.id = c.id"
    " WHERE c.queue = $1 AND c.key = $2 AND " WF_SQL_ROW_RUNS("j", "c.attempt"),
    {TEXTOID, TEXTOID});

// An ordered group's head: its first job from the last one claimed on that
// did not end done or cancelled (a failed one blocks the group).
PreparedStatement find_group_head(
    "SELECT j.id, j.priority, j.run_at, j.status, " WF_SQL_JOB_RUNNING("j") " AS running"
    "  FROM wf.job j"
    " WHERE j.queue = $1 AND j.key = $2"
    "   AND j.id >= coalesce((SELECT g.head_id FROM wf.ordered_group g"
    "                          WHERE g.queue = $1 AND g.key = $2), 0)"
    "   AND j.status NOT IN ('done', 'cancelled')"
    " ORDER BY j.id LIMIT 1",
    {TEXTOID, TEXTOID});

PreparedStatement move_group_head(
    "INSERT INTO wf.ordered_group AS g (queue, key, head_id) VALUES ($1, $2, $3)"
    " ON CONFLICT (queue, key) DO UPDATE SET head_id = excluded.head_id"
    " WHERE g.head_id <> excluded.head_id",
    {TEXTOID, TEXTOID, INT8OID});

// Where each queue's rotation stands in this backend: the group after which
// its next claim starts.
std::unordered_map<std::string, ReadyGroup> rotation;

LOCKTAG key_lock_tag(std::string_view queue, const std::string& key) {
    std::string both(queue);
    both.push_back('\0');
    both += key;
    return hashed_lock_tag(LockSpace::flow_key, both.data(), static_cast<int>(both.size()));
}

// Takes the key's lock without waiting; false if another claim (or an
// enqueue into an ordered queue) holds it.
bool lock_key(std::string_view queue, const std::string& key) {
    LOCKTAG tag = key_lock_tag(queue, key);
    return call([&] { return LockAcquire(&tag, ExclusiveLock, false, true); }) !=
           LOCKACQUIRE_NOT_AVAIL;
}

void note_retry(FlowPick* pick, long ms) {
    if (ms < 0) return;
    pick->retry_after_ms = pick->retry_after_ms < 0 ? ms : std::min(pick->retry_after_ms, ms);
}

// What one key may still give this claim: how many, and for an ordered
// group the one row it may give.
struct KeyRoom {
    int64 room = 0;
    std::optional<ReadyRow> head;
};

KeyRoom key_room(Datum queue, std::string_view queue_name, const ReadyGroup& group,
                 const FlowControl& flow, TimestampTz at, FlowPick* pick) {
    KeyRoom r;
    r.room = INT64_MAX;
    if (group.is_null) return r;  // jobs without a key: no per-key limit
    if (!(flow.ordered || flow.key_concurrency > 0)) return r;
    if (!lock_key(queue_name, group.key)) {
        note_retry(pick, kKeyHeldRetryMs);
        r.room = 0;
        return r;
    }
    Params<2> p;
    p.set(0, queue);
    p.set(1, text_datum(group.key));
    if (flow.ordered) {
        Rows head = find_group_head.execute_latest(p.values, p.nulls);
        if (head.empty() || head.text_at(0, "status") != "pending" || head.bool_at(0, "running")) {
            r.room = 0;
            return r;
        }
        ReadyRow row{head.int64_at(0, "id"), head.int32_at(0, "priority"),
                     DatumGetTimestampTz(head.datum(0, "run_at"))};
        if (row.run_at > at) {  // the head is not due: nor is its group
            r.room = 0;
            return r;
        }
        r.head = row;
        r.room = 1;
    }
    if (flow.key_concurrency > 0) {
        int64 running = count_key_running.execute_latest(p.values, p.nulls).int64_at(0, "running");
        r.room = std::min(r.room, std::max<int64>(0, flow.key_concurrency - running));
    }
    return r;
}

}  // namespace

void lock_keys_for_enqueue(std::string_view queue, std::vector<std::string> keys) {
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    for (const std::string& key : keys) {
        LOCKTAG tag = key_lock_tag(queue, key);
        call([&] { LockAcquire(&tag, ExclusiveLock, false, false); });
    }
}

FlowPick take_with_flow_control(Datum queue, std::string_view queue_name, int limit,
                                const FlowControl& flow) {
    FlowPick pick;
    pick.at = GetCurrentTimestamp();
    long retry = 0;
    std::optional<RateWindowId> queue_window;
    if (flow.rate) {
        queue_window = rate_window_id(queue_name, nullptr);
        limit = rate_reserve(*queue_window, *flow.rate, limit, pick.at, &retry);
        if (retry > 0) note_retry(&pick, retry);
    }
    int reserved = limit;
    if (limit > 0 && !flow.by_key()) {
        pick.rows = take_ready_rows(queue, pick.at, limit);
    } else if (limit > 0) {
        ReadySetByKey ready(queue);
        std::string queue_key(queue_name);
        std::optional<ReadyGroup> cursor;
        if (auto it = rotation.find(queue_key); it != rotation.end()) cursor = it->second;

        std::map<ReadyGroup, KeyRoom> rooms;  // keys looked at by this claim
        std::optional<ReadyGroup> last_taker;  // the key of the last take
        // One turn of a key: takes one job of it (`rest`: as many as the
        // claim still takes); false once the key has nothing more to give
        // this claim (no room, no due row, its rate window spent).
        auto turn = [&](const ReadyGroup& group, bool rest) -> bool {
            auto found = rooms.find(group);
            if (found == rooms.end())
                found = rooms.emplace(group, key_room(queue, queue_name, group, flow, pick.at, &pick)).first;
            KeyRoom& room = found->second;
            if (room.room <= 0) return false;
            int want = rest ? limit - static_cast<int>(pick.rows.size()) : 1;
            want = static_cast<int>(std::min<int64>(want, room.room));
            std::optional<RateWindowId> key_window;
            if (flow.key_rate && !group.is_null) {
                std::string_view key_text(group.key);
                key_window = rate_window_id(queue_name, &key_text);
                long key_retry = 0;
                want = rate_reserve(*key_window, *flow.key_rate, want, pick.at, &key_retry);
                if (key_retry > 0) note_retry(&pick, key_retry);
                if (want == 0) return false;
            }
            const ReadyRow* exact = room.head ? &*room.head : nullptr;
            int got = ready.take(group, pick.at, want, exact, &pick.rows);
            if (key_window && got < want) rate_release(*key_window, *flow.key_rate, want - got, pick.at);
            if (got > 0) {
                room.room -= got;
                last_taker = group;
                if (room.head) {
                    Params<3> h;
                    h.set(0, queue);
                    h.set(1, text_datum(group.key));
                    h.set(2, Int64GetDatum(room.head->id));
                    move_group_head.execute(h.values, h.nulls);
                }
            }
            return got == want && room.room > 0;  // less: no more due rows now
        };

        // The first turn goes round the keys in the index, from where this
        // session's rotation stopped, one descent per key; the keys that can
        // give more go on in turns from memory.
        std::vector<ReadyGroup> live;
        std::optional<ReadyGroup> first;  // the turn's first key
        bool wrapped = false;             // the turn went past the last key since
        while (static_cast<int>(pick.rows.size()) < limit) {
            std::optional<ReadyGroup> group = ready.next_group(cursor);
            if (!group) {
                if (!cursor || wrapped) break;  // no ready rows, or a whole turn done
                cursor.reset();                 // round the rotation again
                if (first) wrapped = true;
                continue;
            }
            cursor = group;
            if (!first) {
                first = group;
            } else if (wrapped && !(*group < *first)) {
                break;  // back where the turn began
            }
            if (turn(*group, false)) live.push_back(*group);
        }
        while (static_cast<int>(pick.rows.size()) < limit && !live.empty()) {
            for (size_t i = 0; i < live.size() && static_cast<int>(pick.rows.size()) < limit;) {
                if (turn(live[i], live.size() == 1))
                    i++;
                else
                    live.erase(live.begin() + static_cast<long>(i));
            }
        }
        ready.close();
        if (last_taker) {
            if (rotation.size() >= 1024) rotation.clear();
            rotation[queue_key] = *last_taker;
        }
    }
    if (queue_window && static_cast<int>(pick.rows.size()) < reserved)
        rate_release(*queue_window, *flow.rate, reserved - static_cast<int>(pick.rows.size()), pick.at);
    return pick;
}

}  // namespace wf::pg
