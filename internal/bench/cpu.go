package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acsledger/acsledger/internal/proccpu"
)

// cpuMeter counts the CPU time that this process and other processes
// (the Postgres server's, or OPA's) spend during a measurement, from
// /proc (Linux; elsewhere it counts nothing). On a shared machine the
// rate swings with other work, while CPU per decision does much less.
type cpuMeter struct {
	other  func() []int // nil: this process only
	self0  time.Duration
	other0 map[int]time.Duration
}

func (m *cpuMeter) start() {
	m.self0 = proccpu.Of(os.Getpid())
	m.other0 = m.snapshot()
}

func (m *cpuMeter) snapshot() map[int]time.Duration {
	cpu := map[int]time.Duration{}
	if m.other != nil {
		for _, pid := range m.other() {
			cpu[pid] = proccpu.Of(pid)
		}
	}
	return cpu
}

// print writes the CPU per decision since start: this process's (the load
// generator's client, and an in-process Guardian), and name's. A process
// that started during the measurement counts from zero; one that ended is
// lost.
func (m *cpuMeter) print(w io.Writer, decisions int, name string) {
	if decisions == 0 {
		return
	}
	self := proccpu.Of(os.Getpid()) - m.self0
	per := func(d time.Duration) string { return ms(d / time.Duration(decisions)) }
	line := "  cpu per decision: this process " + per(self)
	if m.other != nil {
		var other time.Duration
		for pid, c := range m.snapshot() {
			other += c - m.other0[pid]
		}
		line += fmt.Sprintf(", %s %s", name, per(other))
	}
	fmt.Fprintln(w, line)
}

// pgWatch watches the PostgreSQL database of an in-process Guardian's
// store from a connection of its own: the backends serving the database
// (for their CPU) and how many there are (the store's open connections).
// It looks at the database from outside instead of asking the store for
// its pool, so it works on any store the benchmarks open.
type pgWatch struct {
	ctx  context.Context
	mu   sync.Mutex
	conn *pgx.Conn
}

// newPGWatch connects to url; it returns nil for "" (not PostgreSQL) or
// when it cannot connect (the figures are then left out).
func newPGWatch(ctx context.Context, url string) *pgWatch {
	if url == "" {
		return nil
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil
	}
	return &pgWatch{ctx: ctx, conn: conn}
}

func (w *pgWatch) close() {
	if w != nil {
		w.conn.Close(context.WithoutCancel(w.ctx))
	}
}

// backends lists the other backends of the database (the server's
// background processes, other databases' sessions and the watch's own
// are left out).
func (w *pgWatch) backends() []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	rows, err := w.conn.Query(w.ctx, "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
	if err != nil {
		return nil
	}
	pids, _ := pgx.CollectRows(rows, pgx.RowTo[int])
	return pids
}

// pids returns backends for cpuMeter, or nil without a database.
func (w *pgWatch) pids() func() []int {
	if w == nil {
		return nil
	}
	return w.backends
}

// conns counts the database's client connections, -1 if unknown.
func (w *pgWatch) conns() int {
	if w == nil {
		return -1
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var n int
	if err := w.conn.QueryRow(w.ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()").Scan(&n); err != nil {
		return -1
	}
	return n
}

// openFiles counts this process's open descriptors of the file at path
// (an embedded store's database: one per SQLite connection), -1 if
// unknown (no /proc).
func openFiles(path string) int {
	abs, err := filepath.Abs(path)
	if err != nil {
		return -1
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	n := 0
	for _, e := range ents {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && target == abs {
			n++
		}
	}
	return n
}
