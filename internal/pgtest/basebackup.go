package pgtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// BaseBackup is a physical backup of a server's whole cluster (every
// database, role and setting), as pg_basebackup writes it: a data
// directory holding the WAL that makes it consistent.
type BaseBackup struct {
	bin, dir, data string
	cred           *syscall.Credential
	started        bool
}

// BaseBackup copies ps while it runs with `pg_basebackup -X stream
// --checkpoint=fast`, the command docs/operations.md ("Back up") gives:
// -X stream carries the WAL written during the copy, so the backup is
// consistent as of its end with no WAL archive. The backup's directory is
// removed when t ends.
func (ps *Server) BaseBackup(t testing.TB) *BaseBackup {
	t.Helper()
	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if ps.cred != nil {
		if err := os.Chown(dir, int(ps.cred.Uid), int(ps.cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	b := &BaseBackup{bin: ps.bin, dir: dir, data: filepath.Join(dir, "data"), cred: ps.cred}
	host, port, _ := net.SplitHostPort(ps.Addr())
	cmd := exec.Command(filepath.Join(ps.bin, "pg_basebackup"), "-D", b.data, "-X", "stream", "--checkpoint=fast",
		"-d", fmt.Sprintf("host=%s port=%s user=postgres", host, port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: ps.cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pgtest: pg_basebackup: %v\n%s", err, out)
	}
	return b
}

// Start starts a new server on the backup's data directory, as a restore
// on a new machine does: PostgreSQL replays the backup's WAL to its end
// and then takes writes, a cluster of its own with the backup's
// databases and roles, on a free port (URLs of the source name another
// port: replace its Addr with the new one's). The server writes into the
// backup's directory, so a backup starts once. It is stopped when t ends.
func (b *BaseBackup) Start(t testing.TB) *Server {
	t.Helper()
	if b.started {
		t.Fatal("pgtest: a base backup starts once")
	}
	b.started = true
	ps := &Server{bin: b.bin, dir: b.dir, data: b.data, cred: b.cred}
	t.Cleanup(ps.cleanup)
	ps.launch(t)
	return ps
}
