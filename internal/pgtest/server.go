package pgtest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// Server is a private PostgreSQL server that a test may stop and start
// again, to see what the code under test does while the database is down.
// It is its own cluster, never the shared one (or ACSLEDGER_TEST_DATABASE_
// URL's), so stopping it disturbs no other test. Its connecting role is
// the superuser "postgres".
type Server struct {
	bin, dir, data string
	cred           *syscall.Credential
	port           int
	conf           []string // extra settings, passed at every start
	s              *server  // nil while stopped
}

// NewServer starts a private server for t and stops and removes it when t
// ends, with conf's settings ("name=value") beside pgtest's own. It needs
// the server binaries, as NewDatabase does without
// ACSLEDGER_TEST_DATABASE_URL.
func NewServer(t testing.TB, conf ...string) *Server {
	t.Helper()
	bin, err := binDir()
	if err != nil {
		unavailable(t, err)
	}
	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		t.Fatal(err)
	}
	data, cred, err := initCluster(bin, dir)
	if err != nil {
		os.RemoveAll(dir)
		t.Fatalf("pgtest: %v", err)
	}
	ps := &Server{bin: bin, dir: dir, data: data, cred: cred, conf: conf}
	t.Cleanup(ps.cleanup)
	ps.launch(t)
	return ps
}

// launch starts the server on a free port.
func (ps *Server) launch(t testing.TB) {
	t.Helper()
	var err error
	for attempt := 0; ; attempt++ {
		if ps.port, err = freePort(); err == nil {
			if ps.s, err = launchOn(ps.bin, ps.dir, ps.data, ps.cred, ps.port, ps.conf...); err == nil {
				return
			}
		}
		if attempt == 3 {
			t.Fatalf("pgtest: %v", err)
		}
	}
}

// cleanup stops the server if it runs and removes its directory.
func (ps *Server) cleanup() {
	if ps.s != nil {
		ps.s.stopProcess()
	}
	os.RemoveAll(ps.dir)
}

// NewDatabase creates an empty database on the server and returns its URL
// (as the superuser).
func (ps *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	if ps.s == nil {
		t.Fatal("pgtest: NewDatabase on a stopped server")
	}
	name := fmt.Sprintf("p%d_%d", os.Getpid(), dbCount.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := ps.s.exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: couldn't create database: %v", err)
	}
	u := *ps.s.url
	u.Path = "/" + name
	return u.String()
}

// Stop shuts the server down (a fast shutdown: connections are cut, as
// when a database goes away) and returns once it has exited.
func (ps *Server) Stop(t testing.TB) {
	t.Helper()
	if ps.s == nil {
		t.Fatal("pgtest: Stop on a stopped server")
	}
	ps.s.stopProcess()
	ps.s = nil
}

// Start starts a stopped server again on the same port, so URLs handed out
// before Stop work again, and returns once it accepts connections.
func (ps *Server) Start(t testing.TB) {
	t.Helper()
	if ps.s != nil {
		t.Fatal("pgtest: Start on a running server")
	}
	s, err := launchOn(ps.bin, ps.dir, ps.data, ps.cred, ps.port, ps.conf...)
	if err != nil {
		t.Fatalf("pgtest: couldn't restart the server on port %s: %v", strconv.Itoa(ps.port), err)
	}
	ps.s = s
}
