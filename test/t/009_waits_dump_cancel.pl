# Review findings, as tests: a waiting claimer under max_running does not
# hold the queue's settings lock for its whole wait; pg_dump keeps the
# queue; a cancelled job leaves nothing behind in the ready set.
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use WfTap;

my $node = wf_node('waits_dump', sweep_interval => '200ms');

# ---- a wait under max_running leaves other claimers free ----
$node->safe_psql('postgres', "SELECT wf_configure_queue('limited', max_running => 2)");
my $waiter = $node->background_psql('postgres');
start_query($waiter, "SELECT count(*) FROM wf_claim('limited', wait => '3s')");
sleep 0.5;    # the waiter is asleep on an empty queue
my $t0 = time();
$node->safe_psql('postgres', "SELECT wf_enqueue('limited', '{}')");
my $other = $node->safe_psql('postgres', "SELECT count(*) FROM wf_claim('limited', wait => '0')");
my $elapsed = time() - $t0;
ok($elapsed < 1.5, sprintf('another claimer is not blocked by the waiting one (%.0f ms)', $elapsed * 1000));
$node->safe_psql('postgres', "SELECT wf_configure_queue('limited', max_running => 3)");
ok(time() - $t0 < 2.5, 'wf_configure_queue is not blocked either');
my $got = finish_query($waiter);
is($got + $other, 1, 'the one job went to exactly one of them');

# ---- a cancelled pending job leaves the ready set ----
$node->safe_psql('postgres', q{
  SELECT wf_enqueue('cq', '{"n":1}');
  SELECT wf_cancel('cq', id) FROM wf.jobs WHERE queue = 'cq';
});
is($node->safe_psql('postgres', "SELECT count(*) FROM wf.ready WHERE queue = 'cq'"),
	'0', 'no ready row for a cancelled job');
$node->safe_psql('postgres', "SELECT wf_retry('cq', id) FROM wf.jobs WHERE queue = 'cq'");
is($node->safe_psql('postgres', "SELECT count(*) FROM wf.ready WHERE queue = 'cq'"),
	'1', 'wf_retry puts exactly one back');
is($node->safe_psql('postgres', "SELECT count(*) FROM wf_claim('cq', max_jobs => 10)"),
	'1', 'and it is claimed once');

# ---- pg_dump keeps jobs, settings, dependencies and the id sequence ----
$node->safe_psql('postgres', q{
  SELECT wf_configure_queue('dumped', max_attempts => 7);
  SELECT wf_enqueue('dumped', '{"k":"v"}', step_name => 'a');
  SELECT wf_enqueue('dumped', '{}', step_name => 'b',
                    depends_on => ARRAY[(SELECT id FROM wf.jobs WHERE step_name = 'a' AND queue = 'dumped')]);
});
# A job running while the dump is taken.
$node->safe_psql('postgres', "SELECT wf_enqueue('dumped_run', '{}')");
my $runner = $node->background_psql('postgres');
is($runner->query_safe("SELECT attempt FROM wf_claim('dumped_run')"), '1', 'a job runs during the dump');
my $running_at_dump = $node->safe_psql('postgres', "SELECT count(*) FROM wf.jobs WHERE status = 'running'");
my $max_id = $node->safe_psql('postgres', 'SELECT max(id) FROM wf.job');
my $dump = $node->basedir . '/wf.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $node->connstr('postgres') ], 'pg_dump');
$node->safe_psql('postgres', 'CREATE DATABASE restored');
$node->command_ok([ 'pg_restore', '-d', $node->connstr('restored'), $dump ], 'pg_restore');
is( $node->safe_psql('restored',
		"SELECT string_agg(step_name || ':' || status, ',' ORDER BY id) FROM wf.jobs WHERE queue = 'dumped'"),
	'a:pending,b:blocked', 'jobs and their states came back');
is($node->safe_psql('restored', "SELECT max_attempts FROM wf.queue_config WHERE queue = 'dumped'"),
	'7', 'queue settings came back');
my $new_id = $node->safe_psql('restored', "SELECT wf_enqueue('other', '{}')");
ok($new_id > $max_id, 'ids go on after the dumped ones');
# Claimed and completed in one statement: its session ends right after.
is( $node->safe_psql('restored',
		"SELECT payload->>'k', wf_complete('dumped', id, attempt) FROM wf_claim('dumped')"),
	'v|t', 'the restored queue is claimable, and a completes');
is($node->safe_psql('restored', "SELECT status FROM wf.jobs WHERE queue = 'dumped' AND step_name = 'b'"),
	'pending', 'the dependency edge came back: completing a releases b');
# Its claim was not dumped: the job is stuck until wf_recover_lost_claims
# gives it back, the attempt counted.
is($node->safe_psql('restored', 'SELECT wf_sweep()'), '0', 'wf_sweep does not scan for it');
is($node->safe_psql('restored', "SELECT count(*) FROM wf_claim('dumped_run')"), '0',
	'the job running at the dump is not claimable after the restore');
is($node->safe_psql('restored', 'SELECT wf_recover_lost_claims()'), $running_at_dump,
	'wf_recover_lost_claims finds it (and every other job running at the dump)');
is($node->safe_psql('restored', "SELECT status || ' ' || attempt || ' ' || last_error FROM wf.jobs WHERE queue = 'dumped_run'"),
	'pending 1 worker lost: a dump was taken during attempt 1', 'given back, its attempt counted');
is($node->safe_psql('restored', 'SELECT wf_recover_lost_claims()'), '0', 'and only once');
is($node->safe_psql('restored', "SELECT attempt FROM wf_claim('dumped_run')"), '2',
	'and claimed again at attempt 2');
$runner->quit;

$node->stop;
done_testing();
