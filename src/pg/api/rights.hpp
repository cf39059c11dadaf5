// Who may do what, per queue: the functions are the only door to pg_wf's
// tables, and each checks its caller's right on the queues it touches.
//
//   produce     wf_enqueue, wf_enqueue_batch, wf_submit (every step's queue;
//               and the queues of the jobs a new job depends on),
//               wf_signal_with_start (with signal on its event), wf_wait_job,
//               wf_wait_workflow
//   work        wf_claim, wf_complete_and_claim, wf_heartbeat, wf_complete,
//               wf_complete_many, wf_fail, wf_checkpoint, wf_snooze,
//               wf_await_event, wf_start_child (with produce on the child's
//               queues), wf_await_children, wf_complete_with_steps (with
//               produce on the new steps' queues), wf_progress
//   signal      wf_signal, on event names (a pattern matches event names as
//               it matches queue names)
//   operate     wf_retry, wf_cancel, wf_cancel_workflow, wf_workflow, wf_wait_job,
//               wf_wait_workflow, wf_retry_where, wf_cancel_where
//   observe     (1.6) nothing but reading: the views and wf_workflow (which
//               any right opens), for a dashboard's or an exporter's role
//   administer  wf_configure_queue, wf_schedule, wf_unschedule, wf_enable_schedule, wf_grant,
//               wf_revoke; on '*': wf_sweep, wf_recover_lost_claims.
//               Administer implies every other right on the same queues.
//
// Rights are granted to a role per queue or per pattern (`billing.*`: a
// trailing * matches any rest; `*` matches every queue) with wf_grant, and
// held by its members. The views show a role the queues it holds any right
// on. Superusers and pg_wf's owner hold every right, without a look-up.
// Answers are cached per backend until wf_grant, wf_revoke or a change of
// role membership.
#pragma once

#include <optional>

#include "pg/base/postgres.hpp"

namespace wf::pg {

enum class Capability { produce, work, signal, operate, observe, administer };

// The capability's SQL name ('produce', ...), and back (none for a bad name).
const char* capability_name(Capability c);
std::optional<Capability> capability_from_name(std::string_view name);

// Whether `role` holds `capability` (none: any) on `queue` (a queue or
// event name, or a pattern: a right on 'billing.*' covers 'billing.eu.*').
// Inside SPI, running as pg_wf's owner.
bool has_right(Oid role, std::optional<Capability> capability, std::string_view queue);

// 42501 unless the caller (RunAsOwner::caller) holds it; changes nothing.
void require_right(Capability capability, std::string_view queue);
// Whether the current user (outside with_job_tables: the reader of a view)
// holds `capability` (none: any right) on the queue.
bool reader_holds_right(std::optional<Capability> capability, std::string_view queue);

}  // namespace wf::pg
