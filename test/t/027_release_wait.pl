# A completion that finds a dependent job held by another transaction
# (wf.release_wait):
#  * when its parents and the holder's are all the job still depends on,
#    it waits for the holder's commit and releases the job itself: no debt
#    for the worker, the job pending at its commit;
#  * it waits by polling, never queued on the lock, and gives up after
#    wf.release_wait, leaving the release to the worker: two transactions
#    that each complete two jobs, crossing over two shared dependents, both
#    finish (a wait on the lock itself would be a deadlock);
#  * a completion of many jobs waits at most wf.release_wait in all;
#  * a job with more unfinished parents (a fan-in) is not waited for;
#  * wf.release_wait = 0 never waits, nor does REPEATABLE READ;
#  * the holder rolling back while the completion waits: the job keeps the
#    holder's parent unfinished.
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WfTap;

my $node = wf_node('release_wait');
wait_worker_serves($node, 'postgres');
my $sql = sub { $node->safe_psql('postgres', $_[0]) };

# Parents claimed by a session that stays (attempt 1); their child(ren).
# Returns the parents' ids and the children's, in a hash.
my $claimer = $node->background_psql('postgres');
my $graph = 0;
sub graph {
	my (%spec) = @_;    # parents => n, children => [[parent indexes], ...]
	$graph++;
	my $q = "rw$graph";
	my @parents = map { $sql->("SELECT wf_enqueue('$q', '{}')") } 1 .. $spec{parents};
	my @children;
	for my $deps (@{ $spec{children} }) {
		my $ids = join(',', map { $parents[$_] } @$deps);
		push @children, $sql->("SELECT wf_enqueue('${q}_child', '{}', depends_on => ARRAY[$ids]::bigint[])");
	}
	$claimer->query_safe("SELECT count(*) FROM wf_claim('$q', 'rw', max_jobs => 100)");
	return { queue => $q, parents => \@parents, children => \@children };
}
sub complete_sql {
	my ($g, $i) = @_;
	return "SELECT wf_complete('$g->{queue}', $g->{parents}[$i], 1)";
}
sub child_state {
	my ($id) = @_;
	return $sql->("SELECT status || '/' || pending_deps FROM wf.job WHERE id = $id");
}
sub debts { return $sql->("SELECT count(*) FROM wf.release_debt"); }
# Debts a session's open transaction wrote, read in it before it commits
# (the worker may settle them as soon as they do); every other debt is
# settled before each case.
sub debts_written {
	my ($session) = @_;
	return $session->query_safe("SELECT count(*) FROM wf.release_debt");
}
# The worker settles debts on its own; here it must not before a check.
sub settle {
	ok($node->poll_query_until('postgres', "SELECT NOT EXISTS (SELECT 1 FROM wf.release_debt)"),
		'the worker settles the debts left');
}

# ---- the holder commits while the completion waits ----
my $g = graph(parents => 2, children => [[0, 1]]);
my $a = $node->background_psql('postgres');
my $b = $node->background_psql('postgres');
$a->query_safe('BEGIN');
$a->query_safe(complete_sql($g, 0));
is(child_state($g->{children}[0]), 'blocked/2', 'the first completion holds the child, uncommitted');
my $bpid = backend_pid($b);
$b->query_safe("SET wf.release_wait = '10s'");
$b->query_safe('BEGIN');
my $t0 = now_s();
start_query($b, complete_sql($g, 1));
ok( $node->poll_query_until('postgres',
		"SELECT wait_event_type = 'Extension' AND state = 'active' FROM pg_stat_activity WHERE pid = $bpid"),
	'the second completion waits for the holder, seen as an Extension wait');
is($sql->("SELECT count(*) FROM pg_locks WHERE pid = $bpid AND NOT granted"), '0',
	'without queueing on any lock');
$a->query_safe('COMMIT');
is(finish_query($b), 't', 'it completes once the holder commits');
my $took = now_s() - $t0;
note(sprintf('second completion returned after %.0f ms', $took * 1000));
cmp_ok($took, '<', 9, 'before wf.release_wait');
is(debts_written($b), '0', 'leaving no debt to the worker');
$b->query_safe('COMMIT');
is(child_state($g->{children}[0]), 'pending/0', 'it released the child itself');
is($sql->("SELECT count(*) FROM wf.ready WHERE id = $g->{children}[0]"), '1', 'the child is in the ready set once');

# ---- the holder rolls back while the completion waits ----
$g = graph(parents => 2, children => [[0, 1]]);
$a->query_safe('BEGIN');
$a->query_safe(complete_sql($g, 0));
$b->query_safe('BEGIN');
start_query($b, complete_sql($g, 1));
ok( $node->poll_query_until('postgres',
		"SELECT wait_event_type = 'Extension' AND state = 'active' FROM pg_stat_activity WHERE pid = $bpid"),
	'a completion waits for a holder');
$a->query_safe('ROLLBACK');
is(finish_query($b), 't', 'which rolls back: the completion goes on');
is(debts_written($b), '0', 'no debt');
$b->query_safe('COMMIT');
is(child_state($g->{children}[0]), 'blocked/1', 'the child still waits for the parent rolled back');
$a->query_safe(complete_sql($g, 0));
is(child_state($g->{children}[0]), 'pending/0', 'that parent completed again releases it');

# ---- two transactions crossing over two shared children ----
# Parents 0 and 1 share child X; 2 and 3 share child Y. Transaction a
# completes 0 (holds X), then 3 (Y: held by b); b completes 2 (holds Y),
# then 1 (X: held by a). Queued on the locks, one would be a deadlock.
$g = graph(parents => 4, children => [[0, 1], [2, 3]]);
$_->query_safe("SET wf.release_wait = '300ms'") for ($a, $b);
$a->query_safe('BEGIN');
$b->query_safe('BEGIN');
$a->query_safe(complete_sql($g, 0));
$b->query_safe(complete_sql($g, 2));
start_query($a, complete_sql($g, 3));
start_query($b, complete_sql($g, 1));
is(finish_query($a), 't', 'the first crossing completion gives up its wait');
is(finish_query($b), 't', 'so does the second');
is(debts_written($a) . ' ' . debts_written($b), '1 1', 'each left its release to the worker');
$a->query_safe('COMMIT');
$b->query_safe('COMMIT');
ok(!$node->log_contains('deadlock detected'), 'no deadlock');
settle();
is(child_state($g->{children}[0]) . ' ' . child_state($g->{children}[1]), 'pending/0 pending/0',
	'both children released once');

# ---- a batch meeting many held children waits wf.release_wait once ----
# Parents 0-2 and 3-5 pair up over children X0-X2; a holds X0-X2 (it
# completed 0-2), b completes 3-5 in one wf_complete_many.
$g = graph(parents => 6, children => [[0, 3], [1, 4], [2, 5]]);
$a->query_safe('BEGIN');
$a->query_safe("SELECT wf_complete_many('$g->{queue}', ARRAY[$g->{parents}[0], $g->{parents}[1], $g->{parents}[2]]::bigint[], ARRAY[1, 1, 1])");
$b->query_safe("SET wf.release_wait = '2s'");
$b->query_safe('BEGIN');
$t0 = now_s();
$b->query_safe("SELECT wf_complete_many('$g->{queue}', ARRAY[$g->{parents}[3], $g->{parents}[4], $g->{parents}[5]]::bigint[], ARRAY[1, 1, 1])");
$took = now_s() - $t0;
note(sprintf('batch over three held children returned after %.0f ms', $took * 1000));
cmp_ok($took, '>=', 1.9, 'the batch waited for the holder');
cmp_ok($took, '<', 5, 'once for all three children, not once each (6 s)');
is(debts_written($b), '3', 'and left the three releases to the worker');
$a->query_safe('COMMIT');
$b->query_safe('COMMIT');
settle();
is(join(' ', map { child_state($_) } @{ $g->{children} }), 'pending/0 pending/0 pending/0',
	'which releases them');

# ---- a fan-in is not waited for; wf.release_wait = 0 never waits ----
$g = graph(parents => 3, children => [[0, 1, 2]]);
$a->query_safe('BEGIN');
$a->query_safe(complete_sql($g, 0));
$b->query_safe("SET wf.release_wait = '10s'");
$t0 = now_s();
$b->query_safe(complete_sql($g, 1));
$took = now_s() - $t0;
cmp_ok($took, '<', 9, 'a child with another parent still running is not waited for');
is(debts(), '1', 'its release is left to the worker');
$a->query_safe('COMMIT');
settle();
is(child_state($g->{children}[0]), 'blocked/1', 'the child waits for its third parent');

$g = graph(parents => 2, children => [[0, 1]]);
$a->query_safe('BEGIN');
$a->query_safe(complete_sql($g, 0));
$b->query_safe("SET wf.release_wait = 0");
$t0 = now_s();
$b->query_safe(complete_sql($g, 1));
cmp_ok(now_s() - $t0, '<', 9, 'wf.release_wait = 0 does not wait');
is(debts(), '1', 'and leaves the release to the worker');
$a->query_safe('COMMIT');
settle();
is(child_state($g->{children}[0]), 'pending/0', 'which releases the child');

# ---- REPEATABLE READ: no wait (its snapshot could not take the holder's version) ----
$g = graph(parents => 2, children => [[0, 1]]);
$a->query_safe('BEGIN');
$a->query_safe(complete_sql($g, 0));
$b->query_safe("SET wf.release_wait = '10s'");
$b->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
$t0 = now_s();
is($b->query_safe(complete_sql($g, 1)), 't', 'a completion under REPEATABLE READ completes');
cmp_ok(now_s() - $t0, '<', 9, 'without waiting for the holder');
is(debts_written($b), '1', 'leaving the release to the worker');
$a->query_safe('COMMIT');
$b->query_safe('COMMIT');
settle();
is(child_state($g->{children}[0]), 'pending/0', 'which releases the child');

# ---- bad input ----
my ($rc, $out, $err) = $node->psql('postgres', "SET wf.release_wait = '-1'");
like($err, qr/-1 ms is outside the valid range/, 'a negative wait is refused');
($rc, $out, $err) = $node->psql('postgres', "SET wf.release_wait = '11s'");
like($err, qr/outside the valid range/, 'so is one over 10 s');

$_->quit for ($a, $b, $claimer);
done_testing();
