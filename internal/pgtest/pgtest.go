// Package pgtest gives tests a throwaway PostgreSQL server and a fresh
// database per test.
//
// If ACSLEDGER_TEST_DATABASE_URL is set, its server is used (databases are
// created and dropped on it). Otherwise the first test that asks starts a
// private server: initdb into a temporary directory, postgres on a free
// loopback port with its socket in that directory, durability on
// (fsync=on, synchronous_commit=on). Main stops it and removes the directory
// when the test binary ends; the server also gets SIGQUIT if the test
// process dies, so a panicking test does not leave it running.
//
// When no server can be had, tests skip, except under CI=true where they
// fail: a CI run must not pass by skipping the database.
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/acsledger/acsledger/internal/hangwatch"
	"github.com/jackc/pgx/v5"
)

// EnvURL names the variable holding an existing server's URL.
const EnvURL = "ACSLEDGER_TEST_DATABASE_URL"

var (
	once    sync.Once
	srv     *server
	srvErr  error
	dbCount atomic.Int64
)

// Main runs the tests of a package and then stops the server if one was
// started. Call it from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
func Main(m *testing.M) {
	os.Exit(Run(m))
}

// Run is Main for a TestMain that has its own clean-up to do after the
// server stops: it returns the exit code instead of exiting.
//
// A test binary that hangs is stopped shortly before go test's timeout by
// hangwatch, which stops the server and names the running tests last.
func Run(m *testing.M) int {
	defer hangwatch.Start(func() {
		// Once settles the server's start (or forgoes it) before the
		// server is read.
		once.Do(func() {})
		if srv != nil {
			srv.stop()
		}
	})()
	code := m.Run()
	if srv != nil {
		if err := srv.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		}
	}
	return code
}

// NewDatabase creates an empty database for t and returns its URL. The
// connecting role is a superuser (with a private server) or whatever
// ACSLEDGER_TEST_DATABASE_URL names; it owns the database.
func NewDatabase(t testing.TB) string {
	t.Helper()
	once.Do(func() { srv, srvErr = start() })
	if srvErr != nil {
		unavailable(t, srvErr)
	}
	name := fmt.Sprintf("t%d_%d", os.Getpid(), dbCount.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: couldn't create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Logf("pgtest: couldn't drop database %s: %v", name, err)
		}
	})
	u := *srv.url
	u.Path = "/" + name
	return u.String()
}

func unavailable(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("pgtest: PostgreSQL is required under CI=true: %v", err)
	}
	t.Skipf("pgtest: PostgreSQL unavailable (set %s or install the server): %v", EnvURL, err)
}

type server struct {
	url  *url.URL // admin URL, database "postgres"
	dir  string   // temporary directory to remove, "" for an external server
	proc *exec.Cmd
	done chan struct{} // closed when proc has exited
	log  *bytes.Buffer
}

func (s *server) exec(ctx context.Context, sql string) error {
	return ExecURL(ctx, s.url.String(), sql)
}

// ExecURL runs sql on a connection of its own to url and returns the
// error instead of failing the test, for tests that expect a server to
// refuse: a stopped one, or a standby before its promotion.
func ExecURL(ctx context.Context, url, sql string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

func start() (*server, error) {
	if v := os.Getenv(EnvURL); v != "" {
		u, err := url.Parse(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvURL, err)
		}
		s := &server{url: u}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.exec(ctx, "SELECT 1"); err != nil {
			return nil, fmt.Errorf("%s: %w", EnvURL, err)
		}
		return s, nil
	}
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	sweep()
	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		return nil, err
	}
	s, err := startIn(bin, dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

const dirPrefix = "acsledger-pgtest-"

// sweep removes the directories of earlier test processes that died
// without cleaning up (a panic skips Main's cleanup; the kernel still stops
// their server). A directory is left alone while its server runs or while
// it is young enough to belong to a process still starting one.
func sweep() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, d := range dirs {
		fi, err := os.Stat(d)
		if err != nil || time.Since(fi.ModTime()) < 10*time.Minute {
			continue
		}
		if pid, err := os.ReadFile(filepath.Join(d, "data", "postmaster.pid")); err == nil {
			first, _, _ := strings.Cut(string(pid), "\n")
			if n, err := strconv.Atoi(strings.TrimSpace(first)); err == nil && syscall.Kill(n, 0) == nil {
				continue
			}
		}
		os.RemoveAll(d)
	}
}

// binDir finds the directory holding initdb and postgres.
func binDir() (string, error) {
	var candidates []string
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		candidates = append(candidates, strings.TrimSpace(string(out)))
	}
	globbed, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	// Newest version first (lexical order is wrong for 9 vs 15).
	sort.Slice(globbed, func(i, j int) bool { return pgVersion(globbed[i]) > pgVersion(globbed[j]) })
	candidates = append(candidates, globbed...)
	if p, err := exec.LookPath("initdb"); err == nil {
		candidates = append(candidates, filepath.Dir(p))
	}
	for _, d := range candidates {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", errors.New("no initdb and postgres binaries found (tried pg_config --bindir, /usr/lib/postgresql/*/bin, PATH)")
}

func pgVersion(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// startIn initializes a cluster under dir and starts postgres on it.
func startIn(bin, dir string) (*server, error) {
	data, cred, err := initCluster(bin, dir)
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		s, err := launch(bin, dir, data, cred)
		if err == nil || attempt == 3 {
			return s, err
		}
	}
}

// initCluster runs initdb into dir/data and returns the data directory and
// the credential postgres must run with.
func initCluster(bin, dir string) (string, *syscall.Credential, error) {
	data := filepath.Join(dir, "data")
	// initdb and postgres refuse to run as root: as root, run them as the
	// postgres user, which then must own the directory.
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return "", nil, fmt.Errorf("running as root and %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			return "", nil, err
		}
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"--auth=trust", "--no-sync", "--encoding=UTF8", "--locale=C", "--no-instructions")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return "", nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	return data, cred, nil
}

// launch runs postgres on a free port and waits until it accepts
// connections. postgres runs as our child, not daemonized by pg_ctl, so that
// the kernel can signal it when the test process dies (Pdeathsig).
func launch(bin, dir, data string, cred *syscall.Credential) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	return launchOn(bin, dir, data, cred, port)
}

// launchOn is launch on a given port, with extra settings conf
// ("name=value", each passed as -c after the defaults, so they win).
func launchOn(bin, dir, data string, cred *syscall.Credential, port int, conf ...string) (*server, error) {
	s := &server{dir: dir, log: new(bytes.Buffer), done: make(chan struct{})}
	args := []string{"-D", data,
		"-p", strconv.Itoa(port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=on", "-c", "synchronous_commit=on", "-c", "full_page_writes=on",
		"-c", "max_connections=300", "-c", "log_min_messages=warning"}
	for _, c := range conf {
		args = append(args, "-c", c)
	}
	s.proc = exec.Command(filepath.Join(bin, "postgres"), args...)
	s.proc.Stdout, s.proc.Stderr = s.log, s.log
	s.proc.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	// Pdeathsig fires when the OS thread that started the child exits, not
	// the process: start and wait on a thread locked for postgres's whole
	// life, so the signal comes only when the test process dies.
	started := make(chan error)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := s.proc.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		s.proc.Wait()
		close(s.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("couldn't start postgres: %w", err)
	}
	s.url = &url.URL{Scheme: "postgres", User: url.User("postgres"),
		Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Path: "/postgres", RawQuery: "sslmode=disable"}
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := s.exec(ctx, "SELECT 1")
		cancel()
		if err == nil {
			return s, nil
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("postgres exited during startup: %s", s.log)
		default:
		}
		if time.Now().After(deadline) {
			s.stopProcess()
			return nil, fmt.Errorf("postgres not ready after 60s: %v\n%s", err, s.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// stopProcess asks postgres for a fast shutdown, then kills it.
func (s *server) stopProcess() {
	s.proc.Process.Signal(syscall.SIGINT)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		s.proc.Process.Kill()
		<-s.done
	}
}

func (s *server) stop() error {
	if s.proc == nil {
		return nil
	}
	s.stopProcess()
	if err := os.RemoveAll(s.dir); err != nil {
		return fmt.Errorf("couldn't remove %s: %w", s.dir, err)
	}
	return nil
}
