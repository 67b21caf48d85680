package pgtest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// ReplicationConf are the settings of a primary that standbys stream WAL
// from. They are PostgreSQL's defaults since version 10, stated so that a
// test does not rest on them (docs/operations.md, "Failover on a
// synchronous standby"). The replication entries of pg_hba.conf are
// initdb's: trust on loopback, as for every other pgtest connection.
var ReplicationConf = []string{
	"wal_level=replica", "max_wal_senders=10", "max_replication_slots=10",
	"hot_standby=on", "wal_keep_size=256MB",
}

// NewPrimary is NewServer set up to stream its WAL to standbys
// (NewStandby).
func NewPrimary(t testing.TB) *Server {
	t.Helper()
	return NewServer(t, ReplicationConf...)
}

// Addr returns the server's loopback host:port, also while it is stopped.
func (ps *Server) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(ps.port))
}

// Hosts returns dsn, the URL of a database on one server of a replicated
// cluster, with its host replaced by the addresses of servers in order.
// With one server it is the same database on that server (a standby
// serves its primary's databases under the same names); with several it
// is a multi-host URL, whose hosts pgx and libpq try in turn.
func Hosts(t testing.TB, dsn string, servers ...*Server) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	addrs := make([]string, len(servers))
	for i, ps := range servers {
		addrs[i] = ps.Addr()
	}
	u.Host = strings.Join(addrs, ",")
	return u.String()
}

// Exec runs sql as the superuser on the server's "postgres" database.
func (ps *Server) Exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	ctx, conn, done := ps.superuser(t, 30*time.Second)
	defer done()
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("pgtest: %s: %v", sql, err)
	}
}

// superuser connects as the superuser to the server's "postgres" database
// with a context that ends after timeout; done closes the connection and
// ends the context.
func (ps *Server) superuser(t testing.TB, timeout time.Duration) (_ context.Context, _ *pgx.Conn, done func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	conn, err := ps.connect(ctx)
	if err != nil {
		cancel()
		t.Fatalf("pgtest: %v", err)
	}
	return ctx, conn, func() {
		conn.Close(context.Background())
		cancel()
	}
}

func (ps *Server) connect(ctx context.Context) (*pgx.Conn, error) {
	if ps.s == nil {
		return nil, fmt.Errorf("the server on %s is not running", ps.Addr())
	}
	return pgx.Connect(ctx, ps.s.url.String())
}

// NewStandby makes a hot standby of ps, named name, and starts it on a
// free port: pg_basebackup -R writes its primary_conninfo (with
// application_name=name, the name synchronous_standby_names lists) and its
// standby.signal. It returns once ps reports the standby streaming. The
// standby is stopped and removed when t ends.
func (ps *Server) NewStandby(t testing.TB, name string) *Server {
	t.Helper()
	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		t.Fatal(err)
	}
	sb := &Server{bin: ps.bin, dir: dir, data: filepath.Join(dir, "data"), cred: ps.cred, conf: ps.conf}
	t.Cleanup(sb.cleanup)
	if ps.cred != nil {
		if err := os.Chown(dir, int(ps.cred.Uid), int(ps.cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	host, port, _ := net.SplitHostPort(ps.Addr())
	backup := exec.Command(filepath.Join(ps.bin, "pg_basebackup"), "-D", sb.data, "-R", "-X", "stream",
		"--checkpoint=fast", "--no-sync",
		"-d", fmt.Sprintf("host=%s port=%s user=postgres application_name=%s", host, port, name))
	backup.SysProcAttr = &syscall.SysProcAttr{Credential: ps.cred}
	if out, err := backup.CombinedOutput(); err != nil {
		t.Fatalf("pgtest: pg_basebackup: %v\n%s", err, out)
	}
	sb.launch(t)
	ps.waitReplication(t, name, "")
	return sb
}

// SetSynchronous makes every commit on ps wait until standby name has
// flushed it (synchronous_standby_names = name; synchronous_commit is on
// for every pgtest server), and returns once ps reports it synchronous.
func (ps *Server) SetSynchronous(t testing.TB, name string) {
	t.Helper()
	ps.Exec(t, "ALTER SYSTEM SET synchronous_standby_names = "+pgx.Identifier{name}.Sanitize())
	ps.Exec(t, "SELECT pg_reload_conf()")
	ps.waitReplication(t, name, "sync")
}

// waitReplication waits until pg_stat_replication on ps shows standby name
// streaming, with sync_state syncState unless that is "".
func (ps *Server) waitReplication(t testing.TB, name, syncState string) {
	t.Helper()
	ctx, conn, done := ps.superuser(t, 60*time.Second)
	defer done()
	for {
		var state, sync string
		err := conn.QueryRow(ctx, "SELECT state, sync_state FROM pg_stat_replication WHERE application_name = $1", name).Scan(&state, &sync)
		if err == nil && state == "streaming" && (syncState == "" || sync == syncState) {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("pgtest: standby %s not streaming (sync_state %q) after 60s: state %q, sync_state %q, %v", name, syncState, state, sync, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Kill sends SIGKILL to the postmaster, as when its machine dies, and
// returns once it has exited. Its backends notice the postmaster's death
// and exit on their own; none of them answers a commit after it.
func (ps *Server) Kill(t testing.TB) {
	t.Helper()
	if ps.s == nil {
		t.Fatal("pgtest: Kill on a stopped server")
	}
	ps.s.proc.Process.Kill()
	<-ps.s.done
	ps.s = nil
}

// Promote ends a standby's recovery with pg_ctl promote and returns once it
// accepts writes.
func (ps *Server) Promote(t testing.TB) {
	t.Helper()
	if ps.s == nil {
		t.Fatal("pgtest: Promote on a stopped server")
	}
	promote := exec.Command(filepath.Join(ps.bin, "pg_ctl"), "promote", "-D", ps.data, "-w", "-t", "60")
	promote.SysProcAttr = &syscall.SysProcAttr{Credential: ps.cred}
	if out, err := promote.CombinedOutput(); err != nil {
		t.Fatalf("pgtest: pg_ctl promote: %v\n%s", err, out)
	}
}
