// Cron schedules (wf_schedule): the firing of due ticks.
#pragma once

#include "pg/base/postgres.hpp"

namespace wf::pg {

// Inside SPI: enqueues one job per due cron schedule (its latest due tick)
// and moves each schedule to its next run. Returns the jobs enqueued.
int64 fire_due_schedules();

}  // namespace wf::pg
