# pg_wf behind PgBouncer in transaction mode, where a client's server
# session outlives the client: claims (waiting ones too), heartbeats and
# completions work through it; and a killed client's jobs come back through
# leases, which wf.default_lease, set for the pooled role, gives every
# claim that names none. Without it the session lock alone cannot tell:
# the server session the client used lives on in the pool.
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WfTap;

my $pgbouncer = '/usr/sbin/pgbouncer';
plan skip_all => 'pgbouncer is not installed (scripts/install-deps.sh installs it)'
  unless -x $pgbouncer;

my $node = wf_node('pooled', sweep_interval => '100ms');
$node->safe_psql('postgres', q{
CREATE ROLE pooled LOGIN;
CREATE ROLE pooled_bare LOGIN;
SELECT wf_grant('pooled', 'produce', 'pb.*'), wf_grant('pooled', 'work', 'pb.*'),
       wf_grant('pooled_bare', 'work', 'pb.*');
ALTER ROLE pooled SET wf.default_lease = '1s';
});

# PgBouncer in transaction mode in front of the node.
my $port = PostgreSQL::Test::Cluster::get_free_port();
my $dir = PostgreSQL::Test::Utils::tempdir;
my $host = $node->host;
my $node_port = $node->port;
open my $ini, '>', "$dir/pgbouncer.ini" or die $!;
print $ini <<"INI";
[databases]
postgres = host=$host port=$node_port dbname=postgres
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/users.txt
pool_mode = transaction
max_client_conn = 50
default_pool_size = 4
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
ignore_startup_parameters = extra_float_digits
INI
close $ini;
open my $users, '>', "$dir/users.txt" or die $!;
print $users qq{"pooled" ""\n"pooled_bare" ""\n};
close $users;
system($pgbouncer, '-d', "$dir/pgbouncer.ini") == 0 or die 'pgbouncer did not start';
END { if ($dir && -f "$dir/pgbouncer.pid") { kill 'TERM', `cat $dir/pgbouncer.pid` + 0; } }

# The node as seen through the pool (its psql helpers, another address).
my $pool = bless {%$node}, ref $node;
$pool->{_port} = $port;
$pool->{_host} = '127.0.0.1';
sub via_pool
{
	my ($sql, $user) = @_;
	local $ENV{PGUSER} = $user // 'pooled';
	return $pool->safe_psql('postgres', $sql);
}
sub pool_session
{
	my ($user) = @_;
	local $ENV{PGUSER} = $user // 'pooled';
	return $pool->background_psql('postgres');
}
my $tries = 0;
$tries++ until eval { via_pool('SELECT 1') eq '1' } || $tries > 50 || !sleep 0.1;
is(via_pool('SELECT current_user'), 'pooled', 'a client connects through PgBouncer');

# ---- claims, waits and completions through the pool ----
my $id = via_pool(q{SELECT wf_enqueue('pb.mail', '{"to": "ada"}')});
my ($cid, $attempt, $lease) = split /\|/,
  via_pool(q{SELECT id, attempt, lease_expires_at IS NOT NULL FROM wf_claim('pb.mail', wait => '1 second')});
is("$cid $attempt $lease", "$id 1 t", 'a waiting claim through the pool takes the job, with the default lease');
is(via_pool("SELECT wf_heartbeat('pb.mail', $id, 1)"), 't', 'a heartbeat in another transaction');
is(via_pool("SELECT wf_complete('pb.mail', $id, 1, '{\"sent\": true}')"), 't',
	'the completion, in yet another');
my $waiter = pool_session();
start_query($waiter, q{SELECT payload->>'n' FROM wf_claim('pb.wake', wait => '20 seconds')});
sleep 0.3;
via_pool(q{SELECT wf_enqueue('pb.wake', '{"n": "woken"}')});
is(finish_query($waiter), 'woken', 'a claimer waiting through the pool is woken by a commit');
$waiter->quit;

# ---- a killed client's job comes back through its lease ----
my $client = pool_session();
my $job = via_pool(q{SELECT wf_enqueue('pb.work', '{}')});
is($client->query_safe(q{SELECT id FROM wf_claim('pb.work')}), $job, 'a client claims a job');
kill_client($client);
my $watcher = $node->background_psql('postgres');
ok( $node->poll_query_until('postgres', "SELECT status = 'pending' FROM wf.jobs WHERE id = $job"),
	'its job is pending again once the lease ran out');
like($node->safe_psql('postgres', "SELECT last_error FROM wf.jobs WHERE id = $job"),
	qr/lease expired/, 'recovered by its lease');

# Without a lease, the server session the pool keeps still holds the claim.
my $bare = pool_session('pooled_bare');
my $stuck = $node->safe_psql('postgres', q{SELECT wf_enqueue('pb.bare', '{}')});
is($bare->query_safe(q{SELECT id FROM wf_claim('pb.bare')}), $stuck, 'a client without a default lease claims a job');
kill_client($bare);
sleep 2;
is($node->safe_psql('postgres', "SELECT status FROM wf.jobs WHERE id = $stuck"), 'running',
	'a claim without a lease stays with the pooled session that lives on');
$node->safe_psql('postgres', 'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = \'pooled_bare\'');
ok( $node->poll_query_until('postgres', "SELECT status = 'pending' FROM wf.jobs WHERE id = $stuck"),
	'and comes back when that session ends');
$watcher->quit;

done_testing();
