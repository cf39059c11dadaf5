# A job enqueued into a child workflow belongs to the child's parent job
# (wf.job.child_of), also when the enqueue races the child's creation:
#  * an enqueue that names a child workflow whose creating transaction is
#    still open waits for it (a lock, seen in pg_locks) and, once it
#    commits, names the parent;
#  * if the creator rolls back, the enqueue goes on: a plain job in a
#    workflow id that names no workflow;
#  * under REPEATABLE READ, an enqueue whose snapshot predates the child's
#    commit still names the parent;
#  * the creator's own enqueue into its child does not wait for itself;
#  * the wait comes before the enqueue locks anything else: an enqueue
#    into an ordered queue waiting for the child does not hold the key the
#    creator then enqueues with (no deadlock).
# Found by the fuzzer (019): "1 of 6 steps have child_of NULL". On one
# server: on a distributed pg_wf an enqueue runs on its queue's node,
# which the creator's lock does not reach.
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WfTap;

my $node = wf_node('child_race');
my $sql = sub { $node->safe_psql('postgres', $_[0]) };
my $child_spec = q('{"queue": "cw", "steps": [{"name": "s1"}, {"name": "s2", "after": ["s1"]}]}');

# A parent job claimed in `session`; returns its id (attempt 1).
my $parents = 0;
sub claimed_parent {
	my ($session) = @_;
	$parents++;
	my $id = $sql->("SELECT wf_enqueue('cp', '{\"n\": $parents}')");
	is($session->query_safe("SELECT count(*) FROM wf_claim('cp', max_jobs => 1)"), '1',
		"parent $parents claimed");
	return $id;
}
sub child_of { return $sql->("SELECT coalesce(child_of::text, 'NULL') FROM wf.job WHERE id = $_[0]"); }
sub steps_without_parent {
	my ($workflow, $parent) = @_;
	return $sql->("SELECT count(*) FROM wf.job WHERE workflow_id = '$workflow'"
		  . " AND child_of IS DISTINCT FROM $parent");
}

my $creator = $node->background_psql('postgres');
my $enqueuer = $node->background_psql('postgres');
my $epid = backend_pid($enqueuer);
# The enqueuer is waiting on an advisory lock.
sub enqueuer_waits {
	my ($what) = @_;
	ok( $node->poll_query_until('postgres',
			"SELECT wait_event_type = 'Lock' AND wait_event = 'advisory' FROM pg_stat_activity WHERE pid = $epid"),
		$what);
}

# ---- the creator commits while the enqueue waits ----
my $p = claimed_parent($creator);
$creator->query_safe('BEGIN');
my $child = $creator->query_safe("SELECT wf_start_child('cp', $p, 1, 'c', $child_spec)");
like($child, qr/^[0-9a-f-]{36}$/, 'the child is started, uncommitted');
start_query($enqueuer,
	"SELECT wf_enqueue('cw', '{}', workflow_id => '$child', step_name => 'late')");
enqueuer_waits('the enqueue into the uncommitted child waits, on an advisory lock');
is($sql->("SELECT count(*) FROM pg_locks WHERE pid = $epid AND NOT granted AND locktype = 'advisory'"
		  . " AND objsubid = 22343"), '1',
	"in pg_wf's space of advisory locks (0x5747)");
$creator->query_safe('COMMIT');
my $late = finish_query($enqueuer);
like($late, qr/^\d+$/, 'the enqueue returns once the child is committed');
is(child_of($late), $p, 'the late step names the parent');
is(steps_without_parent($child, $p), '0', 'every step of the child names the parent');
is($sql->("SELECT count(*) FROM wf.job WHERE workflow_id = '$child'"), '3', 'the child has its 2 steps and the late one');

# ---- an enqueue after the commit: no wait ----
my $after = $sql->("SELECT wf_enqueue('cw', '{}', workflow_id => '$child')");
is(child_of($after), $p, 'an enqueue after the commit names the parent');

# ---- the creator rolls back ----
$p = claimed_parent($creator);
$creator->query_safe('BEGIN');
$child = $creator->query_safe("SELECT wf_start_child('cp', $p, 1, 'c', $child_spec)");
start_query($enqueuer, "SELECT wf_enqueue('cw', '{}', workflow_id => '$child')");
enqueuer_waits('an enqueue into a child being created waits');
$creator->query_safe('ROLLBACK');
my $stray = finish_query($enqueuer);
like($stray, qr/^\d+$/, 'after the rollback the enqueue goes on');
is(child_of($stray), 'NULL', 'a plain job: the workflow it names does not exist');
is($sql->("SELECT count(*) FROM wf.workflow WHERE id = '$child'"), '0', 'no such workflow');

# ---- REPEATABLE READ: a snapshot from before the child's commit ----
$p = claimed_parent($creator);
$enqueuer->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
$enqueuer->query_safe('SELECT count(*) FROM wf.jobs');    # takes the snapshot
$creator->query_safe('BEGIN');
$child = $creator->query_safe("SELECT wf_start_child('cp', $p, 1, 'c', $child_spec)");
$creator->query_safe('COMMIT');
my $rr = $enqueuer->query_safe("SELECT wf_enqueue('cw', '{}', workflow_id => '$child')");
$enqueuer->query_safe('COMMIT');
is(child_of($rr), $p, 'under REPEATABLE READ the enqueue still names the parent');

# ---- the creator's own enqueue into its child ----
$p = claimed_parent($creator);
$creator->query_safe('BEGIN');
$child = $creator->query_safe("SELECT wf_start_child('cp', $p, 1, 'c', $child_spec)");
my $own = $creator->query_safe("SELECT wf_enqueue('cw', '{}', workflow_id => '$child')");
$creator->query_safe('COMMIT');
is(child_of($own), $p, "the creator's own enqueue does not wait for itself and names the parent");

# ---- the wait comes first: the creator enqueues with the key the waiting
# enqueue names, and both finish ----
$sql->("SELECT wf_configure_queue('co', ordered => true)");
$p = claimed_parent($creator);
$creator->query_safe('BEGIN');
$child = $creator->query_safe("SELECT wf_start_child('cp', $p, 1, 'c', $child_spec)");
start_query($enqueuer, "SELECT wf_enqueue('co', '{}', workflow_id => '$child', key => 'k')");
enqueuer_waits('an enqueue into an ordered queue waits for the child first');
is($sql->("SELECT count(*) FROM pg_locks WHERE pid = $epid AND locktype = 'advisory' AND granted"), '0',
	'holding no advisory lock while it waits (not the key\'s)');
like($creator->query_safe("SELECT wf_enqueue('co', '{}', key => 'k')"), qr/^\d+$/,
	'the creator enqueues with the same key: the waiting enqueue holds no lock on it');
$creator->query_safe('COMMIT');
my ($keyed, $err) = finish_query($enqueuer);
like($keyed, qr/^\d+$/, 'the waiting enqueue then finishes');
is($err, '', 'without an error (no deadlock)');
is(child_of($keyed), $p, 'and names the parent');

$creator->quit;
$enqueuer->quit;
done_testing();
