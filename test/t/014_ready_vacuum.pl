# The background worker vacuums the ready set itself: claims delete ready
# rows, and every claim scans the index from the start of its queue, so the
# dead rows must go long before autovacuum's next visit (autovacuum is off
# here, so only the worker can remove them). The claim table likewise: each
# attempt's claim row dies when it ends.
# - enough claimed rows (1,000) get a vacuum within a few passes, which
#   removes them (fewer than 1,000 are left: those claimed after it);
# - a few claims get none;
# - while an old snapshot keeps the rows from being removed, the worker
#   vacuums once, not at every pass; once the snapshot is gone, it removes
#   them.
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WfTap;

my $node = wf_node('ready_vacuum', sweep_interval => '100ms', conf => "autovacuum = off\n");
ok(wait_reapers($node, 'postgres', 1), 'a reaper serves the database');

sub ready_stats
{
	return $node->safe_psql('postgres',
		"SELECT vacuum_count || ' ' || n_dead_tup FROM pg_stat_user_tables"
		  . " WHERE schemaname = 'wf' AND relname = 'ready'");
}

sub vacuums { return (split / /, ready_stats())[0]; }

# Enqueues n jobs and runs them all, 500 per claim.
sub run_jobs
{
	my ($n) = @_;
	$node->safe_psql('postgres',
		"SELECT count(*) FROM wf_enqueue_batch('v', (SELECT jsonb_agg(g) FROM generate_series(1, $n) g))");
	for (my $left = $n; $left > 0; $left -= 500)
	{
		$node->safe_psql('postgres',
			"SELECT count(*) FROM (SELECT wf_complete_many('v', array_agg(id), array_agg(attempt),"
			  . " array_fill('{}'::jsonb, ARRAY[count(*)::int])) FROM wf_claim('v', max_jobs => 500)) s");
	}
}

sub claim_vacuums
{
	return $node->safe_psql('postgres',
		"SELECT vacuum_count FROM pg_stat_user_tables WHERE schemaname = 'wf' AND relname = 'claim'");
}

# A few claims: below the threshold, no vacuum.
run_jobs(200);
my $before = vacuums();
my $claim_before = claim_vacuums();
sleep 1;
is(vacuums(), $before, 'a few claimed rows are left to autovacuum');
is(claim_vacuums(), $claim_before, 'and a few ended claims too');

# Enough of them: vacuumed, and the dead rows are gone.
run_jobs(1500);
ok( $node->poll_query_until('postgres',
		"SELECT vacuum_count > $before AND n_dead_tup < 1000 FROM pg_stat_user_tables"
		  . " WHERE schemaname = 'wf' AND relname = 'ready'"),
	'the worker vacuums the ready set once 1,000 rows died, and removes them');
ok( $node->poll_query_until('postgres',
		"SELECT vacuum_count > $claim_before AND n_dead_tup < 1000 FROM pg_stat_user_tables"
		  . " WHERE schemaname = 'wf' AND relname = 'claim'"),
	'and the claim table once 1,000 claims ended');

# An old snapshot: the vacuum cannot remove the rows, and is not repeated at
# every pass. The ready set is vacuumed first: rows that died before the
# snapshot (up to 999 left by the runs above) would let the worker's first
# vacuum remove some, and then try again, before the check below reads its
# count.
$node->safe_psql('postgres', 'VACUUM wf.ready');
my $old = $node->background_psql('postgres');
$old->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
$old->query_safe('SELECT count(*) FROM wf.job');
$before = vacuums();
run_jobs(1500);
ok( $node->poll_query_until('postgres',
		"SELECT vacuum_count > $before FROM pg_stat_user_tables"
		  . " WHERE schemaname = 'wf' AND relname = 'ready'"),
	'with an old snapshot open the worker still tries once');
my $tried = vacuums();
sleep 1;    # ten passes
is(vacuums(), $tried, 'and does not try again at every pass');
like(ready_stats(), qr/ [0-9]{4,}$/, 'the rows it could not remove are still counted dead');

$old->query_safe('COMMIT');
$old->quit;
run_jobs(1200);
ok( $node->poll_query_until('postgres',
		"SELECT vacuum_count > $tried AND n_dead_tup < 1000 FROM pg_stat_user_tables"
		  . " WHERE schemaname = 'wf' AND relname = 'ready'"),
	'once the snapshot is gone, the next thousand dead rows get a vacuum that removes the old ones too');
is($node->safe_psql('postgres', "SELECT count(*) FROM wf.jobs WHERE queue = 'v' AND status <> 'done'"),
	'0', 'every job ran');

$node->stop;
done_testing();
