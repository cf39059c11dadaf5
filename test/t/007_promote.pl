# The reaper runs only on a primary. After a failover to a synchronous
# standby it starts on the promoted node, recovers the jobs that were
# running on the old primary, and nothing committed is lost.
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WfTap;

my $primary = wf_node('primary', sweep_interval => '200ms', allows_streaming => 1);
$primary->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'b', has_streaming => 1);
$standby->start;
$primary->append_conf('postgresql.conf', "synchronous_standby_names = '*'");
$primary->reload;
ok( $primary->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_replication WHERE sync_state = 'sync'"),
	'the standby replicates synchronously');

ok(wait_reapers($primary, 'postgres', 1), 'a reaper runs on the primary');
is( $standby->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'pg_wf%'"),
	'0', 'no pg_wf worker runs on the standby');
my ($ret, $out, $err) = $standby->psql('postgres', "SELECT * FROM wf_claim('x')");
ok($ret != 0 && $err =~ /read-only|recovery/, 'a claim on the standby is refused with an error');

# Jobs running on the primary when it goes away.
$primary->safe_psql('postgres',
	"SELECT count(*) FROM wf_enqueue_batch('q', (SELECT jsonb_agg(g) FROM generate_series(1, 200) g))");
$primary->safe_psql('postgres', "SELECT wf_enqueue('held', '{}') FROM generate_series(1, 3)");
my $client = $primary->background_psql('postgres');
my @held = split /\n/, $client->query_safe("SELECT id FROM wf_claim('held', max_jobs => 3)");
is(scalar(@held), 3, 'a session on the primary runs three jobs');
# The last commits before the failover, not waited for by hand: synchronous
# commit is the guarantee.
$primary->safe_psql('postgres', "SELECT wf_enqueue('last', jsonb_build_object('n', g)) FROM generate_series(1, 50) g");
my $total = $primary->safe_psql('postgres', 'SELECT count(*) FROM wf.jobs');

$primary->stop('immediate');
eval { $client->quit; };
$standby->promote;
ok($standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()'), 'the standby is promoted');
ok(wait_reapers($standby, 'postgres', 1), 'a reaper starts on the promoted node');
ok( $standby->poll_query_until('postgres', "SELECT count(*) = 0 FROM wf.jobs WHERE status = 'running'"),
	'the jobs that were running on the old primary are recovered');
my $list = join(',', @held);
is( $standby->safe_psql('postgres',
		"SELECT count(*) FROM wf.jobs WHERE id IN ($list) AND status = 'pending' AND attempt = 1"
		  . " AND last_error LIKE 'worker lost%'"),
	'3', 'pending, attempt kept, worker lost');
is($standby->safe_psql('postgres', 'SELECT count(*) FROM wf.jobs'), $total,
	'nothing committed on the old primary is lost');
is($standby->safe_psql('postgres', "SELECT count(*) FROM wf.jobs WHERE queue = 'last'"),
	'50', 'including the last commits before the failover');

# The promoted node is a working primary: claim, lose the client, recover.
my $watcher = $standby->background_psql('postgres');
my $c2 = $standby->background_psql('postgres');
$standby->safe_psql('postgres', "SELECT wf_enqueue('after', '{}')");
my $id = $c2->query_safe("SELECT id FROM wf_claim('after')");
my $t_kill = kill_client($c2);
my $t_seen = wait_status_epoch($watcher, 'after', [$id], 'pending', 10);
ok(defined $t_seen, 'after promotion a killed client\'s job is recovered');
diag(sprintf('recovery on the promoted node: %.0f ms', ($t_seen - $t_kill) * 1000)) if defined $t_seen;
is( $standby->safe_psql('postgres', "SELECT attempt FROM wf_claim('after')"),
	'2', 'and claimable again at attempt 2');

$watcher->quit;
$standby->stop;
done_testing();
