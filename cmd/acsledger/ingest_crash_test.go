package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/internal/pgtest"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/storeopen"
)

// guardLines writes n bash-guard decisions over 8 sessions to a file.
func guardLines(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "guard.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for i := range n {
		fmt.Fprintf(w, `{"schema_version":"1.0","decision":"allow","action":"allow","source":"opa","reasons":[],"input":{"raw":"ls %d"},`+
			`"metadata":{"engine":"opa","rulebook_digest":"dee3746bf7b5","session_id":"crash-%d"},"evaluated_at":"2026-12-01T10:00:00.000Z",`+
			`"decision_id":"00000000-0000-4000-8000-%012d"}`+"\n", i, i%8, i)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return path
}

type outLine struct {
	Key    string `json:"key"`
	Status string `json:"status"`
}

// TestIngestKill9Resume kills `acsledger ingest` with SIGKILL in the middle
// of a bulk ingest, then runs it again on the same input: every record
// ends stored exactly once, the records the first run reported accepted are
// duplicates the second time, and every chain verifies.
func TestIngestKill9Resume(t *testing.T) {
	storeKinds(t, func(t *testing.T, kind string) {
		ctx := context.Background()
		db := filepath.Join(t.TempDir(), "data")
		if kind == "postgres" {
			db = pgtest.NewDatabase(t)
			if err := storeopen.Migrate(ctx, db); err != nil {
				t.Fatal(err)
			}
		}
		const n = 6000
		input := guardLines(t, n)
		args := []string{"ingest", "--format", "bash-guard", "--db", db, "--no-anchor", "--json", "--batch", "200", input}

		cmd := exec.Command(binary, args...)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		first := map[string]bool{}
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var l outLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Fatalf("%q: %v", sc.Text(), err)
			}
			if l.Status != "accepted" {
				t.Fatalf("first run: %s", sc.Text())
			}
			first[l.Key] = true
			if len(first) == 1000 {
				// Results are printed once their batch committed: kill
				// in the middle of a later batch.
				if err := cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
				break
			}
		}
		cmd.Wait()
		if len(first) != 1000 {
			t.Fatalf("the first run reported %d records before it ended", len(first))
		}

		out, err := exec.Command(binary, args...).Output()
		if err != nil {
			t.Fatalf("resume: %v\n%s", err, out)
		}
		accepted, duplicate := 0, 0
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			var l outLine
			if err := json.Unmarshal([]byte(line), &l); err != nil {
				t.Fatal(err)
			}
			switch l.Status {
			case "accepted":
				accepted++
				if first[l.Key] {
					t.Fatalf("record %s accepted by both runs", l.Key)
				}
			case "duplicate":
				duplicate++
			case "":
			default:
				t.Fatalf("resume: %s", line)
			}
		}
		if accepted+duplicate != n || duplicate < len(first) {
			t.Fatalf("resume: %d accepted, %d duplicate; the first run reported %d", accepted, duplicate, len(first))
		}
		t.Logf("killed after %d reported; %d committed by the first run in all", len(first), duplicate)

		st, err := storeopen.Open(ctx, db, ledger.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		total := int64(0)
		for i := range 8 {
			sid := fmt.Sprintf("crash-%d", i)
			var prev *[32]byte
			var pos int64
			for e, err := range ledger.AllEntries(ctx, st, sid) {
				if err != nil {
					t.Fatal(err)
				}
				if e.Position != pos || (prev == nil) != (e.PreviousHash == nil) || prev != nil && *prev != [32]byte(*e.PreviousHash) {
					t.Fatalf("%s: broken link at %d", sid, e.Position)
				}
				h := [32]byte(e.EntryHash)
				prev, pos = &h, pos+1
			}
			total += pos
		}
		if total != n {
			t.Fatalf("%d entries stored, want %d", total, n)
		}
	})
}
