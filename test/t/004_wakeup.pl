# wf_claim(wait => ...) sleeps on its latch and is woken when a transaction
# that made a job ready in its queue commits — not on rollback, not by NOTIFY.
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WfTap;

my $node = wf_node('wakeup', sweep_interval => '1s');
my $waiter = $node->background_psql('postgres');
my $wpid = backend_pid($waiter);
my $enq = $node->background_psql('postgres');

sub wait_until_sleeping
{
	my ($pid) = @_;
	return $enq->query_safe("SELECT wf_test_wait_for_waiter($pid, 20)") eq 't';
}

# ---- commit-to-return latency over a few dozen jobs ----
my $n = 40;
my (@lat, $all_slept, $all_match);
$all_slept = $all_match = 1;
for my $i (1 .. $n)
{
	start_query($waiter,
		"SELECT id, extract(epoch FROM clock_timestamp()) FROM wf_claim('wq', wait => '10s')");
	$all_slept = 0 unless wait_until_sleeping($wpid);
	# The time is taken inside the transaction, just before COMMIT: the
	# latency measured is an upper bound.
	my ($eid, $t_commit) = split /\|/, $enq->query_safe(
		"BEGIN; SELECT id, extract(epoch FROM clock_timestamp())"
		  . " FROM (SELECT wf_enqueue('wq', jsonb_build_object('i', $i)) AS id OFFSET 0) s; COMMIT");
	my ($gid, $t_ret) = split /\|/, finish_query($waiter);
	$all_match = 0 unless defined $gid && $gid eq $eid;
	push @lat, ($t_ret - $t_commit) * 1000 if defined $t_ret;
}
ok($all_slept, 'the claimer was asleep in wf_claim before each enqueue');
ok($all_match, "the claimer received each of the $n jobs it waited for");
my @sorted = sort { $a <=> $b } @lat;
my ($p50, $p90, $max) = (median(@lat), $sorted[int(0.9 * $#sorted)], $sorted[-1]);
diag(sprintf('wake-up latency, commit to wf_claim return, %d jobs: p50 %.2f ms, p90 %.2f ms, max %.2f ms',
		scalar(@lat), $p50, $p90, $max));
is(scalar(@lat), $n, 'every wait returned a job');
ok($max < 1000, 'every job arrived well under a second after its commit (the wait was 10 s)');
ok($p50 < 100, 'the median wake-up takes milliseconds');

# ---- a rolled-back enqueue wakes nobody and makes no job ----
my $t0 = now_s();
start_query($waiter, "SELECT id FROM wf_claim('rq', wait => '1.5s')");
ok(wait_until_sleeping($wpid), 'claimer waiting on rq');
$enq->query_safe("BEGIN; SELECT wf_enqueue('rq', '{}'); ROLLBACK");
my ($out, $err) = finish_query($waiter);
my $waited = now_s() - $t0;
is($out, '', 'the wait ends without a job');
ok($waited >= 1.4, sprintf('after its full wait (%.2f s)', $waited));
is($node->safe_psql('postgres', "SELECT count(*) FROM wf.jobs WHERE queue = 'rq'"),
	'0', 'the rolled-back enqueue left no job');

# ---- another queue's job is not handed out ----
start_query($waiter, "SELECT id FROM wf_claim('mine', wait => '0.5s')");
ok(wait_until_sleeping($wpid), 'claimer waiting on mine');
$enq->query_safe("SELECT wf_enqueue('theirs', '{}')");
is(finish_query($waiter), '', 'a job in another queue is not returned');

# ---- a scheduled job: the wait ends when it becomes due ----
start_query($waiter,
	"SELECT id, extract(epoch FROM clock_timestamp()) FROM wf_claim('sq', wait => '10s')");
ok(wait_until_sleeping($wpid), 'claimer waiting on sq');
my ($sid, $due) = split /\|/, $enq->query_safe(
	"SELECT wf_enqueue('sq', '{}', run_at => t), extract(epoch FROM t)"
	  . " FROM (SELECT clock_timestamp() + interval '1s' AS t) s");
my ($gid, $t_ret) = split /\|/, finish_query($waiter);
is($gid, $sid, 'the claimer gets the job scheduled one second later');
my $late = ($t_ret - $due) * 1000;
ok($late >= 0 && $late < 1000, sprintf('when it becomes due (%.0f ms after run_at)', $late));

# ---- a completed dependency wakes the claimer of its child ----
my ($parent) = $enq->query_safe("SELECT wf_enqueue('parents', '{}')");
$enq->query_safe("SELECT wf_enqueue('children', '{}', depends_on => ARRAY[$parent]::bigint[])");
start_query($waiter,
	"SELECT id, extract(epoch FROM clock_timestamp()) FROM wf_claim('children', wait => '10s')");
ok(wait_until_sleeping($wpid), 'claimer waiting on children');
my ($pid_, $patt) = split /\|/, $enq->query_safe("SELECT id, attempt FROM wf_claim('parents')");
my $t_done = $enq->query_safe(
	"BEGIN; SELECT extract(epoch FROM clock_timestamp()) FROM (SELECT wf_complete('parents', $pid_, $patt, '{\"v\":1}') OFFSET 0) s; COMMIT");
($gid, $t_ret) = split /\|/, finish_query($waiter);
ok($gid, 'the child released by its parent is handed to the waiting claimer');
ok(($t_ret - $t_done) < 1, sprintf('%.1f ms after the parent completed', ($t_ret - $t_done) * 1000));

# ---- two waiters, two jobs in one commit: one job each ----
my $waiter2 = $node->background_psql('postgres');
my $w2pid = backend_pid($waiter2);
start_query($waiter, "SELECT id FROM wf_claim('pair', wait => '3s')");
start_query($waiter2, "SELECT id FROM wf_claim('pair', wait => '3s')");
ok(wait_until_sleeping($wpid) && wait_until_sleeping($w2pid), 'two claimers waiting on pair');
$t0 = now_s();
$enq->query_safe("SELECT count(*) FROM wf_enqueue_batch('pair', '[{\"a\":1},{\"b\":2}]')");
my $j1 = finish_query($waiter);
my $j2 = finish_query($waiter2);
my $both = now_s() - $t0;
ok($j1 =~ /^\d+$/ && $j2 =~ /^\d+$/ && $j1 ne $j2, 'each waiter got one job of its own')
  or diag("waiter 1 got [$j1], waiter 2 got [$j2]");
ok($both < 1, sprintf('both within a second of the batch commit (%.0f ms)', $both * 1000));

# ---- a waiting claim can be cancelled and the session goes on ----
my $cw = $node->background_psql('postgres', on_error_stop => 0);
my $cwpid = backend_pid($cw);
start_query($cw, "SELECT id FROM wf_claim('nothing', wait => '30s')");
ok(wait_until_sleeping($cwpid), 'claimer waiting on nothing');
$enq->query_safe("SELECT pg_cancel_backend($cwpid)");
($out, $err) = finish_query($cw);
like($err, qr/canceling statement due to user request/, 'the wait is cancelled');
$node->safe_psql('postgres', "SELECT wf_enqueue('nothing', '{}')");
like($cw->query_safe("SELECT id FROM wf_claim('nothing')"), qr/^\d+$/,
	'the session claims normally afterwards');
$cw->quit;

$waiter->quit;
$waiter2->quit;
$enq->quit;
$node->stop;
done_testing();
