# A Citus cluster with pg_wf comes up: a coordinator and two workers, pg_wf
# created on the coordinator and propagated by Citus to both workers at the
# coordinator's version, and pg_wf's background workers running on every
# node, its reaper in the database where the extension is.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/..";
use CitusTap;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

my $c = citus_cluster('c001');
my $coordinator = $c->coordinator;
my @workers = $c->workers;
is(scalar(@workers), 2, 'two worker nodes');

is( $c->sql_on($coordinator, "SELECT count(*) FROM pg_extension WHERE extname = 'citus'"),
	'1', 'citus on the coordinator');

my $version = $c->sql_on($coordinator,
	"SELECT extversion FROM pg_extension WHERE extname = 'pg_wf'");
like($version, qr/^\d+\.\d+$/, "pg_wf $version on the coordinator");
for my $worker (@workers)
{
	is( $c->sql_on($worker, "SELECT extversion FROM pg_extension WHERE extname = 'pg_wf'"),
		$version, 'pg_wf at the same version on ' . $worker->name);
}

my $ports = join(',', sort { $a <=> $b } map { $_->port } @workers);
is( $c->sql_on($coordinator,
		"SELECT string_agg(node_port::text, ',' ORDER BY node_port)"
		  . ' FROM citus_get_active_worker_nodes()'),
	$ports,
	'citus_get_active_worker_nodes() lists the two workers');

# The coordinator reaches every worker over TCP (what Citus itself does).
is( $c->sql_on($coordinator,
		'SELECT count(*) FROM run_command_on_workers($$SELECT 1$$) WHERE success'),
	'2', 'the coordinator runs a command on both workers');

# pg_wf's launcher starts with each server; the launcher starts a reaper for
# each database with pg_wf. On the coordinator CREATE EXTENSION wakes the
# launcher at commit. On the workers Citus runs the propagated CREATE
# EXTENSION in a prepared transaction (two-phase commit), and pg_wf wakes
# nobody on COMMIT PREPARED: the launcher, whose reaper had found no pg_wf in
# the database at startup, looks again only after 60 s
# (kRecheckWithoutExtensionMs in src/pg/worker/worker.cpp). Hence 90 s here.
my %waiting = map { $_->name => $_ } $c->all_nodes;
my $deadline = Time::HiRes::time() + 90;
my %seen_after;
my $started = Time::HiRes::time();
while (%waiting && Time::HiRes::time() < $deadline)
{
	for my $name (sort keys %waiting)
	{
		my $node = $waiting{$name};
		my $r = $c->sql_on($node,
			"SELECT count(*) FILTER (WHERE backend_type = 'pg_wf launcher')"
			  . " || ',' || count(*) FILTER (WHERE backend_type = 'pg_wf reaper'"
			  . "   AND datname = 'postgres')"
			  . ' FROM pg_stat_activity');
		if ($r eq '1,1')
		{
			$seen_after{$name} = Time::HiRes::time() - $started;
			delete $waiting{$name};
		}
	}
	Time::HiRes::sleep(0.5) if %waiting;
}
for my $node ($c->all_nodes)
{
	my $name = $node->name;
	ok(exists $seen_after{$name},
		"pg_wf launcher and reaper of database postgres run on $name");
	note(sprintf('%s: seen after %.1f s', $name, $seen_after{$name}))
	  if exists $seen_after{$name};
}

$c->stop_all;
done_testing();
