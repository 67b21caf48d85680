package pgtest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PgBouncer is a pgbouncer process on a loopback port in front of a
// Server, started by NewPgBouncer and stopped when its test ends.
type PgBouncer struct {
	// Port is the loopback port pgbouncer listens on.
	Port int
	// Mode is its pool_mode: session or transaction.
	Mode string
	proc *exec.Cmd
	done chan struct{}
	log  *bytes.Buffer
}

// BouncerPoolSize is the number of server connections pgbouncer keeps
// per database and login under transaction pooling: fewer than a store's
// pool, so that clients take turns on server connections. Under session
// pooling a client keeps its server connection while it stays connected,
// so there it is BouncerSessionPoolSize, above what the tests hold.
const (
	BouncerPoolSize        = 4
	BouncerSessionPoolSize = 50
)

// NewPgBouncer starts pgbouncer in front of ps with pool_mode mode
// (session or transaction) and returns once it accepts connections. It
// lets the logins users (and postgres) in without a password
// (auth_type=trust: the server's own loopback trust decides), and keeps
// BouncerPoolSize (transaction) or BouncerSessionPoolSize (session)
// server connections per database and login. A missing
// pgbouncer binary skips the test, or fails it under CI=true.
func (ps *Server) NewPgBouncer(t testing.TB, mode string, users ...string) *PgBouncer {
	t.Helper()
	poolSize := BouncerPoolSize
	if mode == "session" {
		poolSize = BouncerSessionPoolSize
	}
	return ps.NewPgBouncerSized(t, mode, poolSize, users...)
}

// NewPgBouncerSized is NewPgBouncer with poolSize server connections per
// database and login.
func (ps *Server) NewPgBouncerSized(t testing.TB, mode string, poolSize int, users ...string) *PgBouncer {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if bin, err = exec.LookPath("/usr/sbin/pgbouncer"); err != nil {
			unavailable(t, fmt.Errorf("no pgbouncer: %w", err))
		}
	}
	if ps.s == nil {
		t.Fatal("pgtest: NewPgBouncer on a stopped server")
	}
	// pgbouncer refuses to run as root: it runs as the server's user, in
	// a directory of its own.
	dir, err := os.MkdirTemp("", dirPrefix+"bouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var list strings.Builder
	for _, u := range append([]string{"postgres"}, users...) {
		fmt.Fprintf(&list, "%q \"\"\n", u)
	}
	b := &PgBouncer{Mode: mode, log: new(bytes.Buffer), done: make(chan struct{})}
	if b.Port, err = freePort(); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`[databases]
* = host=127.0.0.1 port=%d
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = %s
default_pool_size = %d
max_client_conn = 1000
ignore_startup_parameters = extra_float_digits
`, ps.port, b.Port, filepath.Join(dir, "userlist.txt"), mode, poolSize)
	for name, data := range map[string]string{"pgbouncer.ini": conf, "userlist.txt": list.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if ps.cred != nil {
		for _, p := range []string{dir, filepath.Join(dir, "pgbouncer.ini"), filepath.Join(dir, "userlist.txt")} {
			if err := os.Chown(p, int(ps.cred.Uid), int(ps.cred.Gid)); err != nil {
				t.Fatal(err)
			}
		}
	}
	b.proc = exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	b.proc.Stdout, b.proc.Stderr = b.log, b.log
	b.proc.SysProcAttr = &syscall.SysProcAttr{Credential: ps.cred, Pdeathsig: syscall.SIGKILL, Setpgid: true}
	started := make(chan error)
	// As for postgres: started and waited for on a locked thread, so
	// that Pdeathsig fires when the test process dies, not before.
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := b.proc.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		b.proc.Wait()
		close(b.done)
	}()
	if err := <-started; err != nil {
		t.Fatalf("pgtest: couldn't start pgbouncer: %v", err)
	}
	t.Cleanup(func() {
		b.proc.Process.Signal(syscall.SIGINT)
		select {
		case <-b.done:
		case <-time.After(10 * time.Second):
			b.proc.Process.Kill()
			<-b.done
		}
	})
	admin := b.URL(t, ps.s.url.String())
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, admin+"&default_query_exec_mode=simple_protocol")
		cancel()
		if err == nil {
			conn.Close(context.Background())
			return b
		}
		select {
		case <-b.done:
			t.Fatalf("pgtest: pgbouncer exited: %s", b.log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgtest: pgbouncer not answering after 30s: %v\n%s", err, b.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// URL returns dsn, a URL of a database on the bouncer's server, pointed
// at the bouncer instead.
func (b *PgBouncer) URL(t testing.TB, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	u.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(b.Port))
	if u.RawQuery == "" {
		u.RawQuery = "sslmode=disable"
	}
	return u.String()
}

// WithUser returns dsn with its login replaced by user (no password: the
// test servers trust loopback).
func WithUser(t testing.TB, dsn, user string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	u.User = url.User(user)
	return u.String()
}
