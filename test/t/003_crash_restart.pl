# A backend killed with SIGKILL makes the postmaster reinitialise (a crash
# restart): every session is gone, and after the restart the reaper gives
# back every job that was running. Likewise after a clean restart and after
# an immediate shutdown. Nothing committed is lost.
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WfTap;

my $node = wf_node('crash', sweep_interval => '200ms');
ok(wait_reapers($node, 'postgres', 1), 'a reaper serves the database');

my $status_sql = q{
	SELECT string_agg(status || '=' || n, ' ' ORDER BY status)
	  FROM (SELECT status, count(*) AS n FROM wf.jobs GROUP BY status) s};

sub counts
{
	my %c = map { split /=/ } split / /, $node->safe_psql('postgres', $status_sql);
	$c{$_} //= 0 for qw(pending running done failed blocked cancelled waiting);
	return \%c;
}

sub quit_quietly
{
	my $s = shift;
	eval { $s->quit; };
	return;
}

# Committed history: a thousand pending jobs, some done, one failed.
$node->safe_psql('postgres', q{
	SELECT count(*) FROM wf_enqueue_batch('bulk',
	    (SELECT jsonb_agg(jsonb_build_object('n', g)) FROM generate_series(1, 1000) g));
	SELECT wf_enqueue('finished', '{}') FROM generate_series(1, 3);
	SELECT wf_complete(queue, id, attempt, '{"ok":1}') FROM wf_claim('finished', max_jobs => 3);
	SELECT wf_enqueue('dead', '{}', max_attempts => 1);
	SELECT wf_fail(queue, id, attempt, 'boom') FROM wf_claim('dead');
});

# Two live claiming sessions; A's backend will be killed.
$node->safe_psql('postgres', "SELECT wf_enqueue('work', '{}') FROM generate_series(1, 3)");
my $a = $node->background_psql('postgres');
my $a_pid = backend_pid($a);
my @a_jobs = split /\n/, $a->query_safe("SELECT id || ',' || attempt FROM wf_claim('work', max_jobs => 3)");
my ($done_id, $done_att) = split /,/, shift @a_jobs;
is($a->query_safe("SELECT wf_complete('work', $done_id, $done_att)"), 't',
	'A completed one of its three jobs');
$node->safe_psql('postgres', "SELECT wf_enqueue('work2', '{}') FROM generate_series(1, 2)");
my $b = $node->background_psql('postgres');
my @b_jobs = split /\n/, $b->query_safe("SELECT id FROM wf_claim('work2', max_jobs => 2)");
# An enqueue in flight at the crash: never committed, so never a job.
my $d = $node->background_psql('postgres');
$d->query_safe("BEGIN; SELECT wf_enqueue('work', '{}', idempotency_key => 'in-flight')");

my $before = counts();
is($before->{running}, 4, 'four jobs running (two of A, two of B) before the crash');
my $total_before = $node->safe_psql('postgres', 'SELECT count(*) FROM wf.jobs');

# ---- crash restart ----
my $t_kill = now_s();
kill 'KILL', $a_pid;
ok( $node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM wf.jobs WHERE status = 'running'"),
	'after the crash restart no job is left running');
my $crash_s = now_s() - $t_kill;
diag(sprintf('backend SIGKILL to all running jobs recovered (crash restart, polled): %.1f s', $crash_s));
ok($node->log_contains(qr/all server processes terminated; reinitializing/),
	'the postmaster went through a crash restart');
quit_quietly($_) for ($a, $b, $d);

my $after = counts();
is($node->safe_psql('postgres', 'SELECT count(*) FROM wf.jobs'), $total_before,
	'nothing committed is lost: same number of jobs');
is($after->{done}, $before->{done}, 'done jobs unchanged');
is($after->{failed}, $before->{failed}, 'failed jobs unchanged');
is($after->{pending}, $before->{pending} + 4, 'the four running jobs are pending again');
is( $node->safe_psql('postgres', "SELECT count(*) FROM wf.jobs WHERE idempotency_key = 'in-flight'"),
	'0', 'the uncommitted enqueue made no job');
my $recovered_ids = join(',', (map { (split /,/)[0] } @a_jobs), @b_jobs);
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM wf.jobs WHERE id IN ($recovered_ids) AND status = 'pending'"
		  . " AND attempt = 1 AND last_error LIKE 'worker lost%'"),
	'4', 'each recovered job: pending, attempt kept, last_error says worker lost');
is( $node->safe_psql('postgres', "SELECT count(*) FROM wf.jobs WHERE queue = 'bulk' AND status = 'pending'"),
	'1000', 'the thousand committed pending jobs are all there');
ok(wait_reapers($node, 'postgres', 1), 'the reaper runs again after the crash restart');

# A session claiming after the restart keeps its job: the new owner locks work.
my $e = $node->background_psql('postgres');
$node->safe_psql('postgres', "SELECT wf_enqueue('after', '{}')");
my $e_id = $e->query_safe("SELECT id FROM wf_claim('after')");
sleep 1;    # five sweeps
is($node->safe_psql('postgres', "SELECT status FROM wf.jobs WHERE id = $e_id"),
	'running', 'a claim made after the restart is not taken from its live owner');

# ---- clean restart with a live claiming session ----
my $f = $node->background_psql('postgres');
my @f_jobs = split /\n/, $f->query_safe("SELECT id FROM wf_claim('work', max_jobs => 2)");
is(scalar(@f_jobs), 2, 'F claimed two jobs');
$total_before = $node->safe_psql('postgres', 'SELECT count(*) FROM wf.jobs');
$node->restart;
quit_quietly($_) for ($e, $f);
ok( $node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM wf.jobs WHERE status = 'running'"),
	'after a clean restart no job is left running');
my $ids = join(',', $e_id, @f_jobs);
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM wf.jobs WHERE id IN ($ids) AND status = 'pending' AND last_error LIKE 'worker lost%'"),
	'3', 'the jobs of the sessions ended by the restart are pending, worker lost');
is($node->safe_psql('postgres', 'SELECT count(*) FROM wf.jobs'), $total_before,
	'same number of jobs after the clean restart');

# ---- immediate shutdown (as a power cut would, minus the OS) ----
my $g = $node->background_psql('postgres');
$node->safe_psql('postgres', "SELECT wf_enqueue('cut', '{}')");
my $g_id = $g->query_safe("SELECT id FROM wf_claim('cut')");
$node->safe_psql('postgres', "SELECT wf_enqueue('late', '{}') FROM generate_series(1, 10)");
$total_before = $node->safe_psql('postgres', 'SELECT count(*) FROM wf.jobs');
$node->stop('immediate');
quit_quietly($g);
$node->start;
ok( $node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM wf.jobs WHERE status = 'running'"),
	'after an immediate shutdown and start no job is left running');
is($node->safe_psql('postgres', "SELECT status, last_error LIKE 'worker lost%' FROM wf.jobs WHERE id = $g_id"),
	'pending|t', 'the job of the session cut off is pending, worker lost');
is($node->safe_psql('postgres', 'SELECT count(*) FROM wf.jobs'), $total_before,
	'same number of jobs after crash recovery');

$node->stop;
done_testing();
