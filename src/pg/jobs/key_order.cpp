// Ready rows into the key order (key_order.hpp).
#include "pg/jobs/key_order.hpp"

#include <map>
#include <string>
#include <vector>

#include "pg/base/guard.hpp"
#include "pg/base/spi.hpp"

extern "C" {
#include "storage/lock.h"
#include "storage/proc.h"
#include "storage/procarray.h"
}

namespace wf::pg {
namespace {

// A row enqueued outside the key order goes in (of queue $1, or of every
// queue); the queue's mark says which wf_configure_queue set it (its row
// version, xmin).
#define WF_SQL_READY_INTO_KEY_ORDER(WHERE) \
    "moved AS (UPDATE wf.ready SET key_order = true WHERE " WHERE "NOT key_order)"

PreparedStatement mark_queue(
    "WITH " WF_SQL_READY_INTO_KEY_ORDER("queue = $1 AND ")
    " UPDATE wf.queue_config SET key_order_sweep = true WHERE queue = $1",
    {TEXTOID});

PreparedStatement marked_queues(
    "SELECT queue, xmin::text AS mark FROM wf.queue_config WHERE key_order_sweep", {});

// While transactions that overlapped the change run: the rows of those
// that ended since the last look (the only ones that can be new).
PreparedStatement sweep_queue(
    "UPDATE wf.ready SET key_order = true WHERE queue = $1 AND NOT key_order", {TEXTOID});

PreparedStatement every_queue(
    "WITH " WF_SQL_READY_INTO_KEY_ORDER("")
    " UPDATE wf.queue_config SET key_order_sweep = false WHERE key_order_sweep", {});

// Once all of them have ended: the last rows, and the mark cleared.
PreparedStatement finish_queue(
    "WITH " WF_SQL_READY_INTO_KEY_ORDER("queue = $1 AND ")
    " UPDATE wf.queue_config SET key_order_sweep = false"
    "  WHERE queue = $1 AND key_order_sweep AND xmin::text = $2",
    {TEXTOID, TEXTOID});

// A marked queue as the worker saw it: its mark, and the transactions that
// were running then and have not ended since.
struct Waiting {
    std::string mark;
    std::vector<VirtualTransactionId> running;
};
std::map<std::string, Waiting> waiting;  // by queue; the worker's own

std::vector<VirtualTransactionId> running_transactions() {
    struct Found {
        VirtualTransactionId* ids;
        int n;
    };
    // Every transaction of this database, whether or not it holds a
    // snapshot now (one that read the settings earlier may write later).
    Found found = call([] {
        Found f{nullptr, 0};
        f.ids = GetCurrentVirtualXIDs(InvalidTransactionId, false, false, PROC_IN_VACUUM, &f.n);
        return f;
    });
    std::vector<VirtualTransactionId> out(found.ids, found.ids + found.n);
    call([&] { pfree(found.ids); });
    return out;
}

// Drops the transactions that have ended; whether any had.
bool drop_ended(std::vector<VirtualTransactionId>* ids) {
    size_t before = ids->size();
    size_t kept = call([&] {
        size_t k = 0;
        for (size_t i = 0; i < ids->size(); i++)
            if (!VirtualXactLock((*ids)[i], /*wait=*/false)) (*ids)[k++] = (*ids)[i];
        return k;
    });
    ids->resize(kept);
    return kept < before;
}

}  // namespace

void enter_key_order(Datum queue) {
    Params<1> p;
    p.set(0, queue);
    mark_queue.execute(p.values, p.nulls);
}

void every_ready_row_into_key_order() { every_queue.execute(); }

void sweep_key_order() {
    Rows marked = marked_queues.execute();
    std::map<std::string, Waiting> still;
    for (uint64 r = 0; r < marked.size(); r++) {
        std::string queue = marked.text_at(r, "queue");
        std::string mark = marked.text_at(r, "mark");
        auto seen = waiting.find(queue);
        // Seen first (or set again since): what runs now is what may still
        // write outside the key order, and what ended since the change
        // committed may have written there already.
        bool first = seen == waiting.end() || seen->second.mark != mark;
        Waiting w = first ? Waiting{mark, running_transactions()} : std::move(seen->second);
        bool some_ended = drop_ended(&w.running);
        Params<2> p;  // the queue, and its mark for finish_queue
        p.set(0, text_datum(queue));
        p.set(1, text_datum(mark));
        if (w.running.empty()) {
            finish_queue.execute(p.values, p.nulls);
            continue;
        }
        if (first || some_ended) sweep_queue.execute(p.values, p.nulls);
        still[queue] = std::move(w);
    }
    waiting = std::move(still);
}

}  // namespace wf::pg
