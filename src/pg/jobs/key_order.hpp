// Which ready rows are in wf.ready_key_order (1.10): only those of queues
// whose claims go key by key (fair, ordered, per-key limits), so that an
// enqueue into any other queue writes one index entry less. An enqueue
// decides from the queue's settings as it read them, and only while a
// worker serves the database (ReadyInserts); these put in the rows of a
// queue that began to claim key by key.
#pragma once

#include "pg/base/postgres.hpp"

namespace wf::pg {

// Whether `queue`'s settings, as this backend has them cached, say its
// claims do not go key by key: a release (release_rows.hpp) runs inside
// call() and may not read settings, so a queue whose settings are not cached
// (or an allocation failure) answers false and its rows go in the key order.
// Pure C++ and noexcept, callable there. Defined with the settings cache
// (api/queue_settings.cpp), which a claim of the queue fills.
bool cached_claims_plainly(const char* queue, size_t len) noexcept;

// wf_configure_queue, in the transaction that makes `queue` (text) claim
// key by key: its ready rows go in the key order, and the queue is marked
// for sweep_key_order (a transaction running now may still write rows
// outside it, with the settings it read before). Inside SPI.
void enter_key_order(Datum queue);

// The worker, each full pass: for each marked queue, the transactions
// running when it first saw the mark are noted, and the queue's rows go in
// the key order then and each time some of those have ended (a row left
// out becomes visible when its transaction commits); once all of them have
// ended, the mark is cleared (unless a newer wf_configure_queue set it
// again). Inside SPI.
void sweep_key_order();

// wf_distribute(), before wf.ready is distributed: every ready row goes in
// the key order and no queue stays marked (a distributed pg_wf keeps every
// row there; its nodes' workers do not sweep). Inside SPI.
void every_ready_row_into_key_order();

}  // namespace wf::pg
