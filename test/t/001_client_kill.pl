# A client killed with SIGKILL while it holds claims: its backend ends, the
# session lock is released, and the reaper puts its jobs back to pending
# (or failed when their attempts are spent) — woken by the exiting session,
# not at its next sweep.
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WfTap;

my $node = wf_node('client_kill', sweep_interval => '1s');
ok(wait_reapers($node, 'postgres', 1), 'a reaper serves the database');

# ---- 0. claims take at most max_jobs jobs ----
$node->safe_psql('postgres', "SELECT wf_enqueue('limits', '{}') FROM generate_series(1, 5)");
is($node->safe_psql('postgres', "SELECT count(*) FROM wf_claim('limits')"),
	'1', 'wf_claim takes one job by default when five are ready');
is($node->safe_psql('postgres', "SELECT count(*) FROM wf_claim('limits', max_jobs => 2)"),
	'2', 'wf_claim(max_jobs => 2) takes two');

# ---- 1. five committed claims, then one more in an open transaction ----
# Each claim finds exactly the jobs it may take, so the recovery checks
# below do not depend on max_jobs being honoured.
my $watcher = $node->background_psql('postgres');
my $client = $node->background_psql('postgres');
my $victim_backend = backend_pid($client);

my @ids;
for my $n (1 .. 3)
{
	$node->safe_psql('postgres', "SELECT wf_enqueue('kq', jsonb_build_object('n', $n))");
	push @ids, $client->query_safe("SELECT id FROM wf_claim('kq', worker => 'victim')");
}
$node->safe_psql('postgres',
	"SELECT wf_enqueue('kq', jsonb_build_object('n', g)) FROM generate_series(4, 5) g");
push @ids, split /\n/,
  $client->query_safe("SELECT id FROM wf_claim('kq', worker => 'victim', max_jobs => 2)");
is(scalar(@ids), 5, 'the client claimed five jobs in committed transactions');
$node->safe_psql('postgres', "SELECT wf_enqueue('kq', jsonb_build_object('n', 6))");
$client->query_safe('BEGIN');
my $uncommitted = $client->query_safe("SELECT id FROM wf_claim('kq', worker => 'victim')");
ok($uncommitted, 'and one more in a transaction it never commits');

is( $node->safe_psql('postgres', "SELECT count(*) FROM wf.jobs WHERE queue = 'kq' AND status = 'running'"),
	'5', 'others see five running jobs');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 22342"
		  . " AND pid = $victim_backend AND granted"),
	'1', 'the claiming session holds one owner lock, not one per job');

my $t_kill = kill_client($client);
my $t_seen = wait_status_epoch($watcher, 'kq', \@ids, 'pending', 30);
ok(defined $t_seen, 'jobs of the killed client are pending again');
my $recovery_ms = defined $t_seen ? ($t_seen - $t_kill) * 1000 : -1;
diag(sprintf('recovery after SIGKILL of the client (sweep interval 1s): %.0f ms', $recovery_ms));
ok($recovery_ms >= 0 && $recovery_ms < 3000, 'recovered within a few seconds');

ok( $node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $victim_backend"),
	'the backend of the killed client has ended');
is($watcher->query_safe('SELECT 1'), '1',
	'the server did not crash-restart (killing the client is not killing the backend)');

my $list = join(',', @ids);
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM wf.jobs WHERE id IN ($list) AND status = 'pending' AND attempt = 1"
		  . " AND last_error LIKE 'worker lost%' AND last_error LIKE '%$victim_backend%'"
		  . " AND lease_expires_at IS NULL AND finished_at IS NULL"),
	'5', 'recovered jobs keep their attempt; last_error says worker lost (and names the pid)');
is( $node->safe_psql('postgres',
		"SELECT status || ' ' || attempt || ' ' || coalesce(last_error, '-') FROM wf.jobs WHERE id = $uncommitted"),
	'pending 0 -', 'the claim that was never committed left the job untouched');
ok($node->log_contains(qr/pg_wf reaper recovered 5 jobs of lost workers/),
	'the reaper logs what it recovered');

my $reclaimed = $node->safe_psql('postgres', q{
	WITH c AS (SELECT * FROM wf_claim('kq', worker => 'second', max_jobs => 10))
	SELECT count(*) || ' ' || count(*) FILTER (WHERE attempt = 2) || ' '
	       || sum(wf_complete('kq', c.id, c.attempt, '{"ok":true}')::int)
	  FROM c});
is($reclaimed, '6 5 6', 'all six are claimable again, the recovered ones at attempt 2, and complete');

# ---- 2. a sweep interval of 10 s: the exiting session wakes the reaper ----
$node->safe_psql('postgres', "ALTER SYSTEM SET wf.sweep_interval = '10s'; SELECT pg_reload_conf()");
# The reload wakes the reaper, which sweeps and then sleeps 10 s.
ok( $node->poll_query_until('postgres', q{
	SELECT count(*) = 1 FROM pg_stat_activity
	 WHERE backend_type = 'pg_wf reaper' AND datname = 'postgres' AND state = 'idle'}),
	'reaper idle');
sleep 1;

$node->safe_psql('postgres', q{
	SELECT wf_enqueue('fq', '{"kind":"once"}', max_attempts => 1, idempotency_key => 'once');
	SELECT wf_enqueue('fq', '{"kind":"cancel-me"}', idempotency_key => 'cancel-me');
	SELECT wf_enqueue('fq', '{"kind":"retry"}', idempotency_key => 'retry');
	SELECT wf_enqueue('fq2', '{"kind":"child"}', idempotency_key => 'child',
	                  depends_on => ARRAY[(SELECT id FROM wf.jobs WHERE idempotency_key = 'once')]);
});
my $client2 = $node->background_psql('postgres');
my $victim2 = backend_pid($client2);
my @ids2 = split /\n/, $client2->query_safe("SELECT id FROM wf_claim('fq', max_jobs => 3)");
is(scalar(@ids2), 3, 'second client claimed three jobs');
my %key = map { split /\|/ } split /\n/,
  $node->safe_psql('postgres', "SELECT idempotency_key, id FROM wf.jobs WHERE queue IN ('fq', 'fq2')");
is($node->safe_psql('postgres', "SELECT wf_cancel('fq', $key{'cancel-me'})"),
	't', 'cancellation requested for one running job');
is($node->safe_psql('postgres', "SELECT status FROM wf.jobs WHERE id = $key{child}"),
	'blocked', 'the child of the once-only job is blocked');

$t_kill = kill_client($client2);
$t_seen = wait_status_epoch($watcher, 'fq', [ $key{once} ], 'failed', 30);
ok(defined $t_seen, 'the once-only job of the killed client failed');
$recovery_ms = defined $t_seen ? ($t_seen - $t_kill) * 1000 : -1;
diag(sprintf('recovery after SIGKILL of the client (sweep interval 10s): %.0f ms', $recovery_ms));
ok($recovery_ms >= 0 && $recovery_ms < 1000,
	'recovered well before the next sweep: the exiting session woke the reaper');

is( $node->safe_psql('postgres', "SELECT status, attempt, last_error LIKE 'worker lost%', finished_at IS NOT NULL FROM wf.jobs WHERE id = $key{once}"),
	'failed|1|t|t', 'attempts spent (max_attempts 1): failed, last_error says worker lost');
is( $node->safe_psql('postgres', "SELECT status FROM wf.jobs WHERE id = $key{retry}"),
	'pending', 'a job with attempts left is pending');
is( $node->safe_psql('postgres', "SELECT status FROM wf.jobs WHERE id = $key{'cancel-me'}"),
	'cancelled', 'a running job whose cancellation was requested ends cancelled');
is( $node->safe_psql('postgres', "SELECT status FROM wf.jobs WHERE id = $key{child}"),
	'cancelled', 'the dependent of the failed job is cancelled');

# ---- 3. a claimer blocked in wf_claim(wait) gets the recovered job ----
$node->safe_psql('postgres', "SELECT wf_enqueue('handover', '{}')");
my $client3 = $node->background_psql('postgres');
my $hid = $client3->query_safe("SELECT id FROM wf_claim('handover')");
my $waiter = $node->background_psql('postgres');
my $waiter_pid = backend_pid($waiter);
start_query($waiter,
	"SELECT id, attempt, extract(epoch FROM clock_timestamp()) FROM wf_claim('handover', wait => '10s')");
is($watcher->query_safe("SELECT wf_test_wait_for_waiter($waiter_pid, 10)"), 't',
	'a second worker is blocked in wf_claim(wait)');
$t_kill = kill_client($client3);
my ($got) = finish_query($waiter);
my ($gid, $gattempt, $gepoch) = split /\|/, $got;
is("$gid $gattempt", "$hid 2", 'the blocked worker receives the lost job, attempt 2');
my $handover_ms = ($gepoch - $t_kill) * 1000;
diag(sprintf('SIGKILL of a client to its job in the hands of a waiting worker: %.0f ms', $handover_ms));
ok($handover_ms < 1000, 'the handover takes well under the 10 s sweep interval');

# ---- a session ended by pg_terminate_backend: the same, at once ----
$node->safe_psql('postgres', "SELECT wf_enqueue('terminated', '{}')");
my $client4 = $node->background_psql('postgres', on_error_stop => 0);
my $victim4 = backend_pid($client4);
my $tid = $client4->query_safe("SELECT id FROM wf_claim('terminated')");
my $t_term = now_s();
$watcher->query_safe("SELECT pg_terminate_backend($victim4)");
$t_seen = wait_status_epoch($watcher, 'terminated', [$tid], 'pending', 10);
ok(defined $t_seen && $t_seen - $t_term < 1,
	'the job of a terminated session is pending again well before the next sweep');
diag(sprintf('recovery after pg_terminate_backend (sweep interval 10s): %.0f ms',
		($t_seen - $t_term) * 1000)) if defined $t_seen;
eval { $client4->quit; };

$waiter->quit;
$watcher->quit;
$node->stop;
done_testing();
