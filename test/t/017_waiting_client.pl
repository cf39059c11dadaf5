# A claimer blocked in wf_claim(wait => ...) whose client dies (SIGKILL of
# the client process: its server session sees the socket close) ends at
# once, as its next query would, instead of waiting out its wait for
# nobody; and a job enqueued afterwards is not handed to the dead session.
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

done_testing();
