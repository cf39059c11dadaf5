# Without shared_preload_libraries there is no background worker: the SQL
# API works, CREATE EXTENSION says so in a NOTICE, and wf_sweep() recovers
# the jobs of dead sessions by hand.
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use WfTap;

my $node = wf_node('no_preload', preload => 0, no_extension => 1);

my ($ret, $out, $err) = $node->psql('postgres', 'CREATE EXTENSION pg_wf');
is($ret, 0, 'CREATE EXTENSION succeeds without shared_preload_libraries');
# With default settings (client_min_messages = notice): the user must see it.
like($err, qr/(NOTICE|WARNING):.*shared_preload_libraries.*wf_sweep\(\)/s,
	'CREATE EXTENSION prints a NOTICE that recovery happens only through wf_sweep()');
wf_install_helpers($node, 'postgres');
($ret, $out, $err) = $node->psql('postgres', "SELECT wf_enqueue('noisy', '{}')");
unlike($err, qr/NOTICE/, 'no NOTICE on ordinary calls');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'pg_wf%'"),
	'0', 'no pg_wf background worker runs');

# ---- the API works ----
$node->safe_psql('postgres', "SELECT wf_enqueue('api', '{\"x\":1}')");
my ($id, $att) = split /\|/, $node->safe_psql('postgres', "SELECT id, attempt FROM wf_claim('api')");
is($att, '1', 'claim');
is($node->safe_psql('postgres', "SELECT wf_complete('api', $id, 1, '{\"y\":2}')"), 't', 'complete');
is($node->safe_psql('postgres', "SELECT status, result FROM wf.jobs WHERE id = $id"),
	'done|{"y": 2}', 'the job is done with its result');

# A waiting claim still works (it polls without shared memory).
my $waiter = $node->background_psql('postgres');
my $wpid = backend_pid($waiter);
my $enq = $node->background_psql('postgres');
start_query($waiter,
	"SELECT id, extract(epoch FROM clock_timestamp()) FROM wf_claim('slowpoke', wait => '5s')");
is($enq->query_safe("SELECT wf_test_wait_for_waiter($wpid, 10)"), 't', 'claimer waiting');
my ($eid, $t_commit) = split /\|/, $enq->query_safe(
	"BEGIN; SELECT id, extract(epoch FROM clock_timestamp())"
	  . " FROM (SELECT wf_enqueue('slowpoke', '{}') AS id OFFSET 0) s; COMMIT");
my ($gid, $t_ret) = split /\|/, finish_query($waiter);
is($gid, $eid, 'the waiting claimer gets the job');
my $lat = ($t_ret - $t_commit) * 1000;
diag(sprintf('wake-up latency without shared_preload_libraries (polling): %.0f ms', $lat));
ok($lat < 1000, 'well under a second');

# ---- a dead session's jobs wait for wf_sweep() ----
$node->safe_psql('postgres', q{
	SELECT wf_enqueue('orphans', '{}') FROM generate_series(1, 2);
	SELECT wf_enqueue('orphans', '{}', max_attempts => 1, priority => -1);
});
my $client = $node->background_psql('postgres');
my $cpid = backend_pid($client);
my @ids = split /\n/, $client->query_safe("SELECT id FROM wf_claim('orphans', max_jobs => 3)");
is(scalar(@ids), 3, 'a client claimed three jobs');
# A live session holds another job; wf_sweep must leave it alone.
$node->safe_psql('postgres', "SELECT wf_enqueue('kept', '{}')");
my $kid = $enq->query_safe("SELECT id FROM wf_claim('kept')");

kill_client($client);
ok($node->poll_query_until('postgres', "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $cpid"),
	'its backend is gone');
usleep(700_000);
is( $node->safe_psql('postgres', "SELECT count(*) FROM wf.jobs WHERE queue = 'orphans' AND status = 'running'"),
	'3', 'without the worker its jobs stay running');
is($node->safe_psql('postgres', 'SELECT wf_sweep()'), '3', 'wf_sweep() recovers the three jobs');
is( $node->safe_psql('postgres', q{
	SELECT string_agg(status || ':' || attempt || ':' || (last_error LIKE 'worker lost%'), ',' ORDER BY status)
	  FROM wf.jobs WHERE queue = 'orphans'}),
	'failed:1:true,pending:1:true,pending:1:true',
	'two pending and the one without attempts left failed, all with worker lost');
is($node->safe_psql('postgres', "SELECT status FROM wf.jobs WHERE id = $kid"),
	'running', 'the live session keeps its job');
is($node->safe_psql('postgres', 'SELECT wf_sweep()'), '0', 'a second sweep finds nothing');

# ---- an expired lease too ----
$node->safe_psql('postgres', "SELECT wf_enqueue('leased', '{}')");
my $lid = $enq->query_safe("SELECT id FROM wf_claim('leased', lease => '200ms')");
usleep(400_000);
is($node->safe_psql('postgres', 'SELECT wf_sweep()'), '1', 'wf_sweep() recovers an expired lease');
is($enq->query_safe("SELECT wf_heartbeat('leased', $lid, 1)"), 'f', 'whose owner is told so');

# ---- releases without the worker: the statements that wait ----
# With no worker to leave a debt to, a completion releases its children by
# SQL, waiting for a child another completion holds (release_dependents'
# other path): the same counts, run_at and ready rows as the release by hand.
my ($r1, $r2) = split /\|/, $node->safe_psql('postgres',
	"SELECT wf_enqueue('rl_q', '{}'), wf_enqueue('rl_q', '{}')");
my ($rc, $rlate, $rsole) = split /\|/, $node->safe_psql('postgres', qq{
	SELECT wf_enqueue('rl_child', '{}', depends_on => ARRAY[$r1, $r2]),
	       wf_enqueue('rl_child', '{}', depends_on => ARRAY[$r1], run_at => now() + interval '1 day'),
	       wf_enqueue('rl_child', '{}', depends_on => ARRAY[$r2])});
is($node->safe_psql('postgres', "SELECT count(*) FROM wf_claim('rl_q', max_jobs => 2)"), '2', 'parents claimed');
is($node->safe_psql('postgres', "SELECT wf_complete('rl_q', $r1, 1)"), 't', 'first parent completes');
is( $node->safe_psql('postgres', qq{
	SELECT string_agg(status || ':' || pending_deps || ':' || (run_at > now() + interval '23 hours') || ':'
	                  || (SELECT count(*) FROM wf.ready r WHERE r.queue = j.queue AND r.id = j.id), ',' ORDER BY id)
	  FROM wf.job j WHERE queue = 'rl_child'}),
	'blocked:1:false:0,pending:0:true:1,blocked:1:false:0',
	'one parent done: the shared child waits for the other, the late one is ready at its own run_at');
is($node->safe_psql('postgres', "SELECT count(*) FROM wf_complete_many('rl_q', ARRAY[$r2], ARRAY[1])"),
	'1', 'second parent completes');
is( $node->safe_psql('postgres', qq{
	SELECT string_agg(status || ':' || pending_deps || ':'
	                  || (SELECT count(*) FROM wf.ready r WHERE r.queue = j.queue AND r.id = j.id), ',' ORDER BY id)
	  FROM wf.job j WHERE queue = 'rl_child'}),
	'pending:0:1,pending:0:1,pending:0:1', 'every child is pending with its ready row');
is($node->safe_psql('postgres', 'SELECT count(*) FROM wf.release_debt'), '0', 'no debt without a worker');
is($node->safe_psql('postgres', "SELECT count(*) FROM wf_claim('rl_child', max_jobs => 10)"),
	'2', 'the two children due now are claimable');

# Two completions of a shared child's parents at once: the second waits
# for the first's commit, then releases the child.
my ($p1, $p2) = split /\|/, $node->safe_psql('postgres',
	"SELECT wf_enqueue('rl_race', '{}'), wf_enqueue('rl_race', '{}')");
my $shared = $node->safe_psql('postgres',
	"SELECT wf_enqueue('rl_race_child', '{}', depends_on => ARRAY[$p1, $p2])");
$node->safe_psql('postgres', "SELECT count(*) FROM wf_claim('rl_race', max_jobs => 2)");
my $first = $node->background_psql('postgres');
my $second = $node->background_psql('postgres');
$first->query_safe("BEGIN; SELECT wf_complete('rl_race', $p1, 1)");
my $second_pid = backend_pid($second);
start_query($second, "SELECT wf_complete('rl_race', $p2, 1)");
ok( $node->poll_query_until('postgres',
		"SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $second_pid"),
	'the second completion waits for the first (no worker to leave the release to)');
$first->query_safe('COMMIT');
is(finish_query($second), 't', 'then completes');
is( $node->safe_psql('postgres', qq{
	SELECT status || ':' || pending_deps || ':'
	       || (SELECT count(*) FROM wf.ready r WHERE r.queue = j.queue AND r.id = j.id)
	  FROM wf.job j WHERE id = $shared}),
	'pending:0:1', 'and the shared child is released once');
$first->quit;
$second->quit;

$waiter->quit;
$enq->quit;
$node->stop;
done_testing();
