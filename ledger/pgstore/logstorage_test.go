package pgstore_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/acsledger/acsledger/internal/tlogdb"
	"github.com/acsledger/acsledger/ledger/tlog"
	"github.com/acsledger/acsledger/ledger/tlog/tlogstoretest"
	"github.com/acsledger/acsledger/ledger/tlog/tlogtest"
)

// Neither the writer role nor the owner may change or remove what the log
// stored: the database refuses, whatever the service's code does.
func TestLogWriterPrivileges(t *testing.T) {
	t.Parallel()
	st, owner := tlogdb.PG(t)
	ctx := context.Background()
	l := tlogstoretest.NewLog(t, st.LogStorage(), tlog.Config{})
	tlogdb.AppendPG(t, st.Pool(), "s", 0, 300)
	tlogtest.IntegrateAll(t, l)
	for _, pool := range []*pgxpool.Pool{st.Pool(), owner} {
		for _, s := range []string{
			`UPDATE tlog_leaves SET data = '\x00' WHERE idx = 0`,
			`DELETE FROM tlog_leaves WHERE idx = 299`,
			`TRUNCATE tlog_leaves CASCADE`,
			`UPDATE tlog_tiles SET root = root`,
			`DELETE FROM tlog_tiles`,
			`DELETE FROM tlog_checkpoints`,
			`UPDATE tlog_checkpoints SET note = note`,
			`DELETE FROM tlog_head`,
			`UPDATE tlog_head SET size = 1`,
			`DELETE FROM tlog_cosignatures`,
		} {
			if _, err := pool.Exec(ctx, s); err == nil {
				t.Errorf("%s: not refused", s)
			}
		}
	}
}
