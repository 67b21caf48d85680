package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acsledger/acsledger/internal/pgtest"
	"github.com/acsledger/acsledger/ledger/storeopen"
)

// TestReadReplica runs serve with its compliance reads on a streaming
// standby. With the standby's replay paused, a write to the primary
// succeeds and is not visible through a read route, /stats and /metrics
// show the lag, and a verification waits for the replica rather than
// report the log's newer leaves as deleted entries; once replay resumes
// and the lag drops, the write is visible. With the standby stopped,
// reads go to the primary. The replica's URL comes from
// ACSLEDGER_DB_READ_URL and its password from a file, and neither the
// password nor a URL holding it is logged.
func TestReadReplica(t *testing.T) {
	primary := pgtest.NewPrimary(t)
	standby := primary.NewStandby(t, "reader")
	db := primary.NewDatabase(t)
	if out, err := exec.Command(binary, "migrate", "--db", db).CombinedOutput(); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	readURL := pgtest.Hosts(t, db, standby)
	waitReplayed(t, db, readURL)
	const secret = "replica-s3cret"
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), storeopen.EnvReadURL+"="+readURL)
	s := startIn(t, t.TempDir(), env, "serve", "--addr", "127.0.0.1:0", "--db", db, "--db-read-password-file", pwFile)

	status := func(path string) int {
		t.Helper()
		code, _ := get(t, s.url+path)
		return code
	}
	eventually := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after 30s\n%s", what, s.log())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	type replicaStats struct {
		LagBytes   uint64  `json:"lag_bytes"`
		LagSeconds float64 `json:"lag_seconds"`
		Problem    string  `json:"problem"`
	}
	stats := func() *replicaStats {
		t.Helper()
		code, body := get(t, s.url+"/api/v1/stats")
		var st struct {
			ReadReplica *replicaStats `json:"read_replica"`
		}
		if err := json.Unmarshal(body, &st); code != 200 || err != nil || st.ReadReplica == nil {
			t.Fatalf("/stats: %d %v %s\n%s", code, err, body, s.log())
		}
		return st.ReadReplica
	}

	if code, out := post(t, s.url+"/api/v1/sessions/r1/entries", entryJSON(0)); code != 201 {
		t.Fatalf("append r1: %d %v", code, out)
	}
	eventually("r1 readable through the replica", func() bool { return status("/api/v1/sessions/r1") == 200 })

	standby.Exec(t, "SELECT pg_wal_replay_pause()")
	if code, out := post(t, s.url+"/api/v1/sessions/r2/entries", entryJSON(1)); code != 201 {
		t.Fatalf("append r2 with replay paused: %d %v", code, out)
	}
	if code := status("/api/v1/sessions/r2"); code != 404 {
		t.Fatalf("r2 read with the replica's replay paused: %d, want 404 (reads go to the replica)", code)
	}
	// A write's scope check reads the primary: a token scoped to team-a/
	// appending to team-b's session, which the paused replica does not
	// hold yet, gets the 404 of an out-of-scope session, not the 409 of
	// a session that exists (which would tell it the session exists).
	if code, out := post(t, s.url+"/api/v1/sessions/r-team-b/entries?agent_id=team-b/x", entryJSON(2)); code != 201 {
		t.Fatalf("append r-team-b with replay paused: %d %v", code, out)
	}
	scopedWriter := newToken(t, db, "--role", "writer", "--name", "team-a-writer", "--scope", "team-a/")
	req, err := http.NewRequest(http.MethodPost, s.url+"/api/v1/sessions/r-team-b/entries?agent_id=team-a/x", strings.NewReader(entryJSON(3)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+scopedWriter)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("scoped writer appending to another team's session the replica has not replayed: %d %s, want 404", resp.StatusCode, body)
	}
	eventually("lag in /stats", func() bool { st := stats(); return st.LagBytes > 0 && st.LagSeconds > 0 })
	lagMetric := regexp.MustCompile(`(?m)^acsledger_db_read_lag_bytes(\{[^}]*\})? ([1-9][0-9]*)$`)
	if _, body := get(t, s.url+"/metrics"); !lagMetric.Match(body) || !strings.Contains(string(body), "acsledger_db_read_lag_seconds") {
		t.Errorf("/metrics lacks the replica's lag:\n%s", body)
	}

	// A verification reads the log on the primary: it waits for the
	// replica to replay what the log covers.
	type verified struct {
		code int
		body []byte
	}
	done := make(chan verified, 1)
	go func() {
		code, body := get(t, s.url+"/api/v1/sessions/r1/verify")
		done <- verified{code, body}
	}()
	select {
	case v := <-done:
		t.Fatalf("verification answered while the replica was behind: %d %s", v.code, v.body)
	case <-time.After(time.Second):
	}
	standby.Exec(t, "SELECT pg_wal_replay_resume()")
	select {
	case v := <-done:
		for _, code := range []string{"logged_entry_missing", "truncated"} {
			if v.code != 200 || strings.Contains(string(v.body), code) {
				t.Errorf("verification after the replica caught up: %d %s", v.code, v.body)
			}
		}
	case <-time.After(catchUpTimeout):
		t.Fatalf("verification still waiting after the replica resumed\n%s", s.log())
	}
	eventually("r2 readable once the lag dropped", func() bool { return status("/api/v1/sessions/r2") == 200 })
	eventually("lag back to 0", func() bool { return stats().LagBytes == 0 })

	standby.Stop(t)
	eventually("the stopped replica reported", func() bool { return stats().Problem == "unreachable" })
	if code, out := post(t, s.url+"/api/v1/sessions/r3/entries", entryJSON(2)); code != 201 {
		t.Fatalf("append r3: %d %v", code, out)
	}
	if code := status("/api/v1/sessions/r3"); code != 200 {
		t.Errorf("r3 read with the replica down: %d, want 200 from the primary", code)
	}
	s.stop(t, syscall.SIGTERM)
	if strings.Contains(s.log(), secret) {
		t.Errorf("the log shows the replica's password:\n%s", s.log())
	}
}

// waitReplayed waits until the standby at replica has replayed the WAL
// the primary at primary had written.
func waitReplayed(t *testing.T, primary, replica string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := pgx.Connect(ctx, primary)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	var lsn string
	if err := p.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	for {
		r, err := pgx.Connect(ctx, replica)
		if err == nil {
			var ok bool
			err = r.QueryRow(ctx, "SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", lsn).Scan(&ok)
			r.Close(context.Background())
			if err == nil && ok {
				return
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("the standby has not replayed %s: %v", lsn, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReadReplicaRefused: serve stops at once, naming the replica without
// its password, when the replica cannot be opened or the store is not
// PostgreSQL.
func TestReadReplicaRefused(t *testing.T) {
	db := pgtest.NewDatabase(t)
	if out, err := exec.Command(binary, "migrate", "--db", db).CombinedOutput(); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	unreachable := "host=127.0.0.1 port=1 dbname=ledger user=acs password=" + dbSecret + " connect_timeout=2"
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unreachable replica", []string{"--db", db, "--db-read", unreachable}, "couldn't open the read replica host=127.0.0.1 port=1 dbname=ledger user=acs password=xxxxx"},
		{"embedded store", []string{"--db", t.TempDir(), "--db-read", db}, "not one"},
		{"directory as replica", []string{"--db", db, "--db-read", "./replica"}, "a read replica is a PostgreSQL URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(binary, append([]string{"serve", "--addr", "127.0.0.1:0"}, tc.args...)...)
			cmd.Dir = t.TempDir()
			out, err := cmd.CombinedOutput()
			if err == nil || strings.Contains(string(out), dbSecret) || !strings.Contains(string(out), tc.want) {
				t.Errorf("serve %v: %v\n%s\nwant a failure naming %q, without the password", tc.args, err, out, tc.want)
			}
		})
	}
}
