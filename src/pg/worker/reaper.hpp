// The reaper: running jobs whose owner session is gone, or whose lease ran
// out, go back to pending (or to failed when their attempts are spent).
#pragma once

#include "pg/base/postgres.hpp"

namespace wf::pg {

// One reaper pass, inside SPI: recovers running jobs whose owner session is
// gone or whose lease expired, and once after the claim table was emptied
// (a crash, a promotion: its sentinel row is gone) the jobs whose claims
// went with it. Returns the number of jobs recovered.
int64 sweep_database();

}  // namespace wf::pg
