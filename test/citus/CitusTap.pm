# Helpers for the pg_wf tests on Citus (test/citus/t/*.pl, run by
# test/citus/run.sh): a coordinator and workers on this machine, each a
# PostgreSQL::Test::Cluster node with citus and pg_wf preloaded.
#
#   my $c = citus_cluster('name', %opts);
#   $c->{coordinator}, @{ $c->{workers} }   (also $c->coordinator, $c->workers)
#   $c->sql_on($node, $sql)                 safe_psql on database postgres
#   $c->all_nodes                           coordinator first, then workers
#   $c->wait_for($sql, $want, $seconds)     polls $sql on the coordinator
#   $c->queues_on_workers($n)               $n queue names placed on each worker
#   $c->stop_all                            fast shutdown of every node
#
# Connections between the nodes: Cluster.pm gives each node a port of its
# own (checked free on 127.0.0.1 and reserved) and, on Unix, a socket
# directory with listen_addresses = ''. Citus connects to the nodes by host
# and port, so each node also listens on 127.0.0.1 (the address the port was
# checked on) and is registered in Citus by that address, not "localhost"
# (which may resolve to ::1 first). Host connections from 127.0.0.1 are
# trusted: Cluster's initdb runs with -A trust, and pg_regress --config-auth
# changes pg_hba.conf only on Windows (SSPI); citus_cluster checks the
# pg_hba.conf line anyway. The tests' own psql still goes through the socket.
package CitusTap;

use strict;
use warnings FATAL => 'all';

use Exporter 'import';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

our @EXPORT = qw(citus_cluster);

my $tcp_host = '127.0.0.1';

# Options:
#   workers        => 2, the number of worker nodes
#   sweep_interval => '200ms' (wf.sweep_interval)
#   conf           => extra postgresql.conf lines for every node
#   no_extension   => 1 leaves pg_wf uncreated (citus is created anyway)
#   distribute     => 1 runs SELECT wf_distribute() on the coordinator after
#                     CREATE EXTENSION pg_wf
sub citus_cluster
{
	my ($name, %opt) = @_;
	my $nworkers = $opt{workers} // 2;
	my $self = bless { name => $name, coordinator => undef, workers => [] },
	  __PACKAGE__;

	my @nodes;
	for my $i (0 .. $nworkers)
	{
		my $node_name = $i == 0 ? "${name}_coordinator" : "${name}_worker$i";
		my $node = PostgreSQL::Test::Cluster->new($node_name);
		$node->init;
		my $conf = '';
		# citus must come first in shared_preload_libraries.
		$conf .= "shared_preload_libraries = 'citus,pg_wf'\n";
		$conf .= "listen_addresses = '$tcp_host'\n";
		$conf .= "max_connections = 100\n";
		# Citus's maintenance daemon, pg_wf's launcher and a reaper per
		# database, and Citus's background tasks (rebalancer) all take one.
		$conf .= "max_worker_processes = 32\n";
		$conf .= "wf.sweep_interval = '" . ($opt{sweep_interval} // '200ms') . "'\n";
		# Logical decoding, for Citus's shard moves (non-blocking ones need it).
		$conf .= "wal_level = logical\n";
		$conf .= "max_wal_senders = 10\n";
		$conf .= "max_replication_slots = 10\n";
		# Citus's default node_conninfo is sslmode=require, which makes
		# CREATE EXTENSION citus generate a self-signed certificate and turn
		# ssl on with ALTER SYSTEM; the nodes here talk over loopback.
		$conf .= "citus.node_conninfo = 'sslmode=prefer'\n";
		# A Citus built with libcurl reports usage to citusdata.com daily.
		$conf .= "citus.enable_statistics_collection = off\n";
		$conf .= "restart_after_crash = on\n";
		$conf .= $opt{conf} if $opt{conf};
		$node->append_conf('postgresql.conf', $conf);
		my $hba = PostgreSQL::Test::Utils::slurp_file($node->data_dir . '/pg_hba.conf');
		$hba =~ /^host\s+all\s+all\s+127\.0\.0\.1\/32\s+trust\b/m
		  or $node->append_conf('pg_hba.conf', "host all all $tcp_host/32 trust\n");
		push @nodes, $node;
	}
	$self->{coordinator} = $nodes[0];
	$self->{workers} = [ @nodes[ 1 .. $#nodes ] ];

	for my $node (@nodes)
	{
		$node->start;
		$self->sql_on($node, 'CREATE EXTENSION citus');
	}
	my $coordinator = $self->{coordinator};
	$self->sql_on($coordinator,
		"SELECT citus_set_coordinator_host('$tcp_host', " . $coordinator->port . ')');
	for my $worker (@{ $self->{workers} })
	{
		$self->sql_on($coordinator,
			"SELECT citus_add_node('$tcp_host', " . $worker->port . ')');
	}
	unless ($opt{no_extension})
	{
		# Citus propagates it to the workers.
		$self->sql_on($coordinator, 'CREATE EXTENSION pg_wf');
		$self->sql_on($coordinator, 'SELECT wf_distribute()') if $opt{distribute};
	}
	return $self;
}

sub coordinator { return $_[0]{coordinator}; }
sub workers     { return @{ $_[0]{workers} }; }
sub all_nodes   { my ($self) = @_; return ($self->{coordinator}, @{ $self->{workers} }); }

sub sql_on
{
	my ($self, $node, $sql) = @_;
	return $node->safe_psql('postgres', $sql);
}

# Polls $sql on the coordinator until it returns $want, for $seconds (10)
# at most; says what it got last when it gives up.
sub wait_for
{
	my ($self, $sql, $want, $seconds) = @_;
	my $t0 = Time::HiRes::time();
	my $got;
	while (Time::HiRes::time() - $t0 < ($seconds // 10))
	{
		$got = $self->sql_on($self->{coordinator}, $sql);
		return 1 if $got eq $want;
		Time::HiRes::usleep(20_000);
	}
	diag("waited for '$want', got '$got': $sql");
	return 0;
}

# Claims job $id of $queue through $client (a background_psql session),
# completing whatever else of the queue it claims first; returns the id it
# ended on ('' when the queue ran dry), the attempt and the job's inputs.
sub claim_job
{
	my ($self, $client, $queue, $id) = @_;
	my ($got, $attempt, $inputs) = ('', '', '');
	for (1 .. 100)
	{
		($got, $attempt, $inputs) = split /\|/,
		  $client->query_safe("SELECT id, attempt, coalesce(inputs, '{}') FROM wf_claim('$queue')");
		$got //= '';
		last if $got eq $id || $got eq '';
		$client->query_safe("SELECT wf_complete('$queue', $got, $attempt)");
	}
	return ($got, $attempt, $inputs);
}

# Waits until no node has anything left in its wf.outbox (each node's own
# table, which its worker relays) for $seconds (10) at most: an entry whose
# relay failed is tried again a second later, or more.
sub wait_for_relays
{
	my ($self, $seconds) = @_;
	my $t0 = Time::HiRes::time();
	my $left;
	while (Time::HiRes::time() - $t0 < ($seconds // 10))
	{
		$left = 0;
		$left += $self->sql_on($_, 'SELECT count(*) FROM wf.outbox') for $self->all_nodes;
		return 1 if $left == 0;
		Time::HiRes::usleep(20_000);
	}
	diag("$left entries left in the nodes' wf.outbox");
	return 0;
}

# For each worker, $count queue names (from "${prefix}1" on, sorted) whose
# shard is placed on it: ([q1, q5], [q2, q3]) with two workers.
sub queues_on_workers
{
	my ($self, $count, $prefix) = @_;
	$prefix //= 'q';
	my %on;
	for my $n (1 .. 200)
	{
		my $queue = "$prefix$n";
		my $port = $self->sql_on($self->{coordinator},
			"SELECT nodeport FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)"
			  . " WHERE shardid = get_shard_id_for_distribution_column('wf.job', '$queue')");
		push @{ $on{$port} }, $queue if @{ $on{$port} // [] } < $count;
	}
	return map { [ sort @{ $on{ $_->port } // [] } ] } $self->workers;
}

# The workers, then the coordinator; a node not running is left alone.
# Cluster.pm's END block tears down whatever is still running anyway (with
# immediate shutdowns), when a test dies before calling this.
sub stop_all
{
	my ($self) = @_;
	for my $node (reverse $self->all_nodes)
	{
		$node->stop('fast', fail_ok => 1);
	}
	return;
}

1;
