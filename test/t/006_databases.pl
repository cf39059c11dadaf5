# One reaper per database where pg_wf is created, with no configuration:
# databases created after the server started, served again after a crash
# restart; none where the extension is absent or dropped; as many databases
# over time as one likes, whatever max_worker_processes.
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WfTap;

my $node = wf_node('databases', sweep_interval => '200ms', no_extension => 1);
for my $db (qw(db1 db2 db3))
{
	$node->safe_psql('postgres', "CREATE DATABASE $db");
}
for my $db (qw(db1 db2))
{
	$node->safe_psql($db, 'CREATE EXTENSION pg_wf');
	wf_install_helpers($node, $db);
}
ok(wait_reapers($node, 'db1', 1), 'a reaper serves db1, created after server start');
ok(wait_reapers($node, 'db2', 1), 'a reaper serves db2');
ok(wait_reapers($node, 'postgres', 0), 'no reaper stays in postgres (no extension)');
ok(wait_reapers($node, 'db3', 0), 'no reaper stays in db3 (no extension)');

my %watcher = map { $_ => $node->background_psql($_) } qw(db1 db2);

my $kill_round = 0;

# One killed client per database; each database's reaper recovers its own.
sub kill_and_recover
{
	my ($db, $queue, $what) = @_;
	$queue .= '_' . ++$kill_round;    # a queue with just this job
	$node->safe_psql($db, "SELECT wf_enqueue('$queue', '{}')");
	my $client = $node->background_psql($db);
	my $id = $client->query_safe("SELECT id FROM wf_claim('$queue')");
	my $t_kill = kill_client($client);
	my $t_seen = wait_status_epoch($watcher{$db}, $queue, [$id], 'pending', 10);
	ok(defined $t_seen, "$what: job of the killed client in $db is pending again");
	diag(sprintf("$what: recovery in $db took %.0f ms", ($t_seen - $t_kill) * 1000))
	  if defined $t_seen;
	is( $node->safe_psql($db, "SELECT last_error LIKE 'worker lost%' FROM wf.jobs WHERE id = $id"),
		't', "$what: last_error says worker lost in $db");
	return;
}
kill_and_recover('db1', 'q1', 'before the crash');
kill_and_recover('db2', 'q2', 'before the crash');

# ---- crash restart with running jobs in both databases ----
my %live;
for my $db (qw(db1 db2))
{
	$node->safe_psql($db, "SELECT wf_enqueue('crashq', '{}') FROM generate_series(1, 2)");
	$live{$db} = $node->background_psql($db);
	my $n = $live{$db}->query_safe("SELECT count(*) FROM wf_claim('crashq', max_jobs => 2)");
	is($n, '2', "two jobs running in $db");
}
my $victim = backend_pid($live{db1});
$_->quit for values %watcher;
kill 'KILL', $victim;
for my $db (qw(db1 db2))
{
	ok( $node->poll_query_until($db, "SELECT count(*) = 0 FROM wf.jobs WHERE status = 'running'"),
		"after the crash restart no job is left running in $db");
	# The crash emptied wf.claim, so the jobs show pending at once; the
	# worker's first pass after the restart recovers them, attempt counted.
	ok( $node->poll_query_until($db,
			"SELECT count(*) FROM wf.jobs WHERE queue = 'crashq' AND status = 'pending'"
			  . " AND last_error LIKE 'worker lost%'", '2'),
		"both jobs of $db are pending, worker lost");
}
ok($node->log_contains(qr/all server processes terminated; reinitializing/), 'it was a crash restart');
eval { $_->quit } for values %live;
ok(wait_reapers($node, 'db1', 1), 'the reaper serves db1 again');
ok(wait_reapers($node, 'db2', 1), 'the reaper serves db2 again');
ok(wait_reapers($node, 'db3', 0), 'and still none in db3');

%watcher = map { $_ => $node->background_psql($_) } qw(db1 db2);
kill_and_recover('db1', 'q1', 'after the crash');
kill_and_recover('db2', 'q2', 'after the crash');

# ---- dropping and re-creating the extension ----
$node->safe_psql('db2', 'DROP EXTENSION pg_wf');
ok(wait_reapers($node, 'db2', 0), 'the reaper leaves db2 when pg_wf is dropped');
ok(wait_reapers($node, 'db1', 1), 'db1 keeps its reaper');
$node->safe_psql('db2', 'CREATE EXTENSION pg_wf');
my $t0 = now_s();
ok(wait_reapers($node, 'db2', 1), 'created again: a reaper serves db2 again');
my $back = now_s() - $t0;
ok($back < 10, sprintf('without waiting for the launcher\'s periodic recheck (%.1f s)', $back));
$watcher{db2}->quit;
$watcher{db2} = $node->background_psql('db2');
kill_and_recover('db2', 'q2', 'after re-creation');

$_->quit for values %watcher;
$node->stop;

# ---- more databases over time than worker slots ----
# The registry of reapers has max_worker_processes slots. A database that
# was dropped, or that lacks pg_wf, gives its slot up to the next one: the
# reaper of each new database is known (a DROP DATABASE stops it; before,
# the reaper of a database past the slots ran unknown, and its DROP failed
# with 55006).
my $small = wf_node('few_slots', conf => "max_worker_processes = 4\n");
for my $n (1 .. 8)
{
	my $db = "churn_$n";
	$small->safe_psql('postgres', "CREATE DATABASE $db");
	$small->safe_psql($db, 'CREATE EXTENSION pg_wf');
	ok(wait_reapers($small, $db, 1), "database $n of 8 gets its reaper");
	my ($rc, $out, $err) = $small->psql('postgres', "DROP DATABASE $db");
	is($rc, 0, "and can be dropped, the reaper stopped") or diag($err);
}
ok(wait_reapers($small, 'postgres', 1), 'the first database keeps its reaper throughout');
$small->stop;
done_testing();
