package pgstore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// ownerConn connects to url as the owner role, which may ANALYZE and set
// the planner's options (the writer role may not); closed at t's end.
func ownerConn(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(ctx) })
	return c
}

// explain returns the lines of "EXPLAIN"+query on c, joined: query may
// start with EXPLAIN's options, e.g. " (COSTS OFF) SELECT ...".
func explain(t *testing.T, c *pgx.Conn, query string, args ...any) string {
	t.Helper()
	rows, err := c.Query(context.Background(), "EXPLAIN "+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}
