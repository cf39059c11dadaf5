# Ownership is the session: a live owner keeps its job however long it runs.
# A lease covers what the session cannot show (a hung worker): missed
# heartbeats give the job back, and the stale worker is fenced out.
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use WfTap;

my $node = wf_node('alive_lease', sweep_interval => '200ms');
ok(wait_reapers($node, 'postgres', 1), 'a reaper serves the database');
my $watcher = $node->background_psql('postgres');

# ---- 2. a live owner keeps its job for many sweep intervals ----
$node->safe_psql('postgres', "SELECT wf_enqueue('long', '{\"llm\":\"call\"}')");
my $owner = $node->background_psql('postgres');
my $owner_pid = backend_pid($owner);
my ($lid, $latt) = split /\|/,
  $owner->query_safe("SELECT id, attempt FROM wf_claim('long', worker => 'slow')");
is($latt, '1', 'claimed at attempt 1');

sleep 2;    # ten sweeps of 200 ms
is( $node->safe_psql('postgres', "SELECT status, attempt, owner_pid FROM wf.jobs WHERE id = $lid"),
	"running|1|$owner_pid", 'after ten sweep intervals the idle owner still has its job');
is($node->safe_psql('postgres', 'SELECT wf_sweep()'),
	'0', 'a sweep by hand from another session recovers nothing');

# The application's own advisory locks live in another key space.
$owner->query_safe(
	'SELECT pg_advisory_lock(22342), pg_advisory_lock(0, 22342), pg_advisory_unlock(22342),'
	  . ' pg_advisory_unlock(0, 22342)');
# A long statement (the call to the model) does not make the session look dead.
start_query($owner, 'SELECT pg_sleep(1.5)');
sleep 1;
is( $node->safe_psql('postgres', "SELECT status, attempt FROM wf.jobs WHERE id = $lid"),
	'running|1', 'the owner is busy in a long statement: still running');
finish_query($owner);
is($owner->query_safe("SELECT wf_heartbeat('long', $lid, 1)"),
	't', 'heartbeat of the live owner: still yours');
is( $node->safe_psql('postgres', "SELECT status, attempt FROM wf.jobs WHERE id = $lid"),
	'running|1', 'still running, same attempt, after the app took and released its own advisory locks');
is($owner->query_safe("SELECT wf_complete('long', $lid, 1, '{\"answer\":42}')"),
	't', 'the owner completes its job');

# ---- 3. a lease kept alive by heartbeats, then left to expire ----
$node->safe_psql('postgres', "SELECT wf_enqueue('leased', '{}')");
my ($eid, $eatt) = split /\|/,
  $owner->query_safe("SELECT id, attempt FROM wf_claim('leased', lease => '1.5s')");
is( $node->safe_psql('postgres',
		"SELECT lease_expires_at BETWEEN now() + interval '1s' AND now() + interval '1.5s'"
		  . " FROM wf.jobs WHERE id = $eid"),
	't', 'the claim has a lease deadline 1.5 s out');
my $beats_ok = 1;
for (1 .. 7)
{
	usleep(300_000);
	$beats_ok = 0 unless $owner->query_safe("SELECT wf_heartbeat('leased', $eid, $eatt)") eq 't';
}
ok($beats_ok, 'seven heartbeats over 2.1 s all return true');
is( $node->safe_psql('postgres', "SELECT status, attempt FROM wf.jobs WHERE id = $eid"),
	'running|1', 'heartbeats kept the job past its first deadline');

# Now the worker hangs: no more heartbeats, the session stays connected.
my $deadline = $node->safe_psql('postgres',
	"SELECT extract(epoch FROM lease_expires_at) FROM wf.jobs WHERE id = $eid");
my $t_seen = wait_status_epoch($watcher, 'leased', [$eid], 'pending', 30);
ok(defined $t_seen, 'the job with an expired lease is recovered');
my $lag_ms = defined $t_seen ? ($t_seen - $deadline) * 1000 : -1;
diag(sprintf('lease expiry to recovery (sweep interval 200ms): %.0f ms', $lag_ms));
ok($lag_ms > 0 && $lag_ms < 1500, 'recovered after its deadline, within a few sweeps');
is( $node->safe_psql('postgres',
		"SELECT attempt, last_error LIKE 'worker lost: lease expired%', result IS NULL FROM wf.jobs WHERE id = $eid"),
	'1|t|t', 'attempt kept; last_error says worker lost (lease expired)');

is($owner->query_safe("SELECT wf_heartbeat('leased', $eid, 1)"),
	'f', 'the stale worker\'s heartbeat returns false');
is($owner->query_safe("SELECT wf_complete('leased', $eid, 1, '{\"stale\":true}')"),
	'f', 'the stale worker\'s wf_complete returns false');
is($owner->query_safe("SELECT wf_fail('leased', $eid, 1, 'stale') IS NULL"),
	't', 'the stale worker\'s wf_fail returns NULL');
is( $node->safe_psql('postgres', "SELECT status, attempt, result IS NULL FROM wf.jobs WHERE id = $eid"),
	'pending|1|t', 'and none of them changed the job');

my $other = $node->background_psql('postgres');
is($other->query_safe("SELECT id || '|' || attempt FROM wf_claim('leased')"),
	"$eid|2", 'a new claim gets the job at attempt + 1');
is($owner->query_safe("SELECT wf_complete('leased', $eid, 1, '{\"stale\":true}')"),
	'f', 'the stale token stays fenced out while the new owner runs it');
is($owner->query_safe("SELECT wf_heartbeat('leased', $eid, 1)"), 'f', 'stale heartbeat: false');
is($other->query_safe("SELECT wf_heartbeat('leased', $eid, 2)"), 't', 'new owner heartbeat: true');
is($other->query_safe("SELECT wf_complete('leased', $eid, 2, '{\"fresh\":true}')"),
	't', 'the new owner completes');
is( $node->safe_psql('postgres', "SELECT status, attempt, result FROM wf.jobs WHERE id = $eid"),
	'done|2|{"fresh": true}', 'the result is the new owner\'s');

# ---- a queue-level lease applies to claims that name none ----
$node->safe_psql('postgres',
	"SELECT wf_configure_queue('qlease', lease => '500ms'); SELECT wf_enqueue('qlease', '{}')");
my $qid = $owner->query_safe("SELECT id FROM wf_claim('qlease')");
is( $node->safe_psql('postgres', "SELECT lease_expires_at IS NOT NULL FROM wf.jobs WHERE id = $qid"),
	't', 'a claim in a queue with a lease gets a deadline');
ok(defined wait_status_epoch($watcher, 'qlease', [$qid], 'pending', 10),
	'and is recovered when it expires although its owner is alive');
is($owner->query_safe("SELECT wf_heartbeat('qlease', $qid, 1)"), 'f',
	'its owner learns so from the heartbeat');

$owner->quit;
$other->quit;
$watcher->quit;
$node->stop;
done_testing();
