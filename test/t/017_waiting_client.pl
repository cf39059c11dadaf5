# A claimer blocked in wf_claim(wait => ...) whose client dies (SIGKILL of
# the client process: its server session sees the socket close) ends at
# once, as its next query would, instead of waiting out its wait for
# nobody; and a job enqueued afterwards is not handed to the dead session.
# While it waits, a claim does not hold back vacuum (its session shows no
# xmin), unless the statement around it reads other tables afterwards.
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WfTap;

my $node = wf_node('waiting_client');
my $waiter = $node->background_psql('postgres');
my $backend = backend_pid($waiter);
start_query($waiter, "SELECT id FROM wf_claim('wc', wait => '5 minutes')");
ok( $node->poll_query_until('postgres',
		"SELECT wait_event = 'Extension' FROM pg_stat_activity WHERE pid = $backend"),
	'the claimer waits');
my $killed = kill_client($waiter);
ok( $node->poll_query_until('postgres',
		"SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $backend)"),
	'its session ends once the client is gone');
my $took = now_s() - $killed;
note(sprintf('client SIGKILL to the end of its waiting session: %.0f ms', $took * 1000));
cmp_ok($took, '<', 60, 'long before its wait would have ended');
ok($node->log_contains('could not receive data from client|connection to client lost'),
	'the server logs the lost connection');
my $id = $node->safe_psql('postgres', "SELECT wf_enqueue('wc', '{}')");
is($node->safe_psql('postgres', "SELECT status FROM wf.jobs WHERE id = $id"), 'pending',
	'a job enqueued afterwards stays pending');

# ---- a waiting claim lets vacuum go on ----
my $w1 = $node->background_psql('postgres');
my $p1 = backend_pid($w1);
start_query($w1, "SELECT id FROM wf_claim('wx', wait => '30 seconds')");
ok( $node->poll_query_until('postgres',
		"SELECT wait_event = 'Extension' AND backend_xmin IS NULL FROM pg_stat_activity WHERE pid = $p1"),
	'a waiting claim holds no xmin');
# Rows that die meanwhile can be removed.
$node->safe_psql('postgres', q{
CREATE TABLE churn (n int) WITH (autovacuum_enabled = off);
INSERT INTO churn SELECT generate_series(1, 20000);
DELETE FROM churn;
});
$node->safe_psql('postgres', 'VACUUM churn');
is( $node->safe_psql('postgres',
		"SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'churn'"),
	'0', 'a VACUUM meanwhile removes the rows that died while the claim waited');
# A statement that reads a table after the claim keeps its snapshot.
my $w2 = $node->background_psql('postgres');
my $p2 = backend_pid($w2);
start_query($w2, "SELECT c.id, t.relname FROM wf_claim('wx2', wait => '30 seconds') c"
	. " JOIN pg_class t ON t.oid = 'pg_class'::regclass");
ok( $node->poll_query_until('postgres',
		"SELECT wait_event = 'Extension' AND backend_xmin IS NOT NULL FROM pg_stat_activity WHERE pid = $p2"),
	'a waiting claim in a statement that reads another table keeps its xmin');
my $wx = $node->safe_psql('postgres', "SELECT wf_enqueue('wx', '{}')");
is(finish_query($w1), $wx, 'the waiting claim takes the job enqueued meanwhile');
my $wx2 = $node->safe_psql('postgres', "SELECT wf_enqueue('wx2', '{}')");
is(finish_query($w2), "$wx2|pg_class", 'and so does the other');
$w1->quit;
$w2->quit;

done_testing();
