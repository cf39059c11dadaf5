// Dependencies between shard groups, on a distributed pg_wf (1.8). A call
// runs in one shard group on one node (citus/shard_route.hpp) and cannot
// reach another group's rows; so what crosses groups is left, in the
// call's own transaction, in the node's wf.outbox, and the node's worker
// takes it there (worker/relay.cpp), each entry in one transaction that
// commits on both sides (two-phase through Citus) or not at all:
//
//   enqueue of a job C whose depends_on names ids not in C's group:
//     C is blocked, counting them unfinished, with an edge to each (as any
//     edge, in C's group); outbox 'subscribe'. The worker finds each
//     parent P's queue and calls wf._subscribe in P's group: P locked, and
//     either C is recorded in wf.remote_dependent there (P unfinished) or
//     P's end is delivered to C at once (wf._parent_ended in C's group).
//   P ends (done, failed, cancelled, by any transition): its dependents in
//     wf.remote_dependent -> outbox 'ended'; the worker takes P's end and
//     its dependents out of P's group under P's lock (wf._take_dependents)
//     and delivers it to each of their groups (wf._parent_ended).
//   wf._parent_ended in C's group: done -> P's result recorded as C's
//     input (wf.remote_input) and C released of P; failed or cancelled ->
//     C and what waits on it cancelled (and further groups noted again).
//
// So each edge's release happens exactly once: a delivery that comes twice
// (an old subscription and a new one after a retry of the child) finds
// the parent's result recorded, and releases nothing. A parent's end is seen by
// its dependents in other groups a worker's round trip later (the worker
// is woken at commit). Inside a routed group only; on one server these do
// nothing and are never called.
#pragma once

#include <optional>

#include "pg/base/spi.hpp"

namespace wf::pg {

// Outbox 'subscribe': job (child_queue, child_id), enqueued by `role`,
// waits on `parents`, which are not in its group.
void note_subscription(Datum child_queue, int64 child_id, const std::vector<int64>& parents,
                       const std::string& role);

// Outbox 'ended' for each of `ended` (jobs of this group that just ended)
// that has dependents in other groups; wakes the worker if any.
void note_remote_dependents(const std::vector<int64>& ended);

// In the parent's group: job (child_queue, child_id) subscribes to job
// (parent_queue, parent_id). Returns the parent's status when it has
// ended ('done', 'failed', 'cancelled') or 'missing'; else records the
// child and returns 'waiting'.
std::string subscribe_to_parent(Datum parent_queue, int64 parent_id, Datum child_queue,
                                int64 child_id);

// In the child's group: the end of `parent` (status 'done', 'failed',
// 'cancelled'; or 'missing', or 'forbidden': in queue `name`, where the
// children's enqueuer may not produce), with its result and name (its step
// name or id), delivered to `children`. Returns the jobs released or
// cancelled.
int64 deliver_parent_end(int64 parent, const std::string& status, std::optional<Datum> result,
                         Datum name, const std::vector<int64>& children);

// The ids of job (queue, id)'s dependencies that are not in this group.
std::vector<int64> remote_dependencies_of(Datum queue, int64 id);

// Before a job asks its dependencies in other groups again (a retry):
// the results they delivered go, each to be delivered (and released) once
// more.
void forget_remote_inputs(Datum queue, int64 id);

// In the parent's group, once job (parent_queue, parent_id) has ended (or
// is gone): {"status", "result", "name", "children": [{"queue", "id"}]},
// its dependents in other groups taken out of wf.remote_dependent under
// its lock; nothing when it has not ended (retried since). A Datum copied
// out of SPI memory.
std::optional<Datum> take_dependents(Datum parent_queue, int64 parent_id);

}  // namespace wf::pg
