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
	"github.com/acsledger/acsledger/ledger/readroute"
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
	migrateStore(t, db)
	readURL := pgtest.Hosts(t, db, standby)
	waitReplayed(t, db, readURL)
	const secret = "replica-s3cret"
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A limit far above the test's pause keeps the reads on the paused
	// replica (TestReadReplicaMaxLag tests the limit); it comes from the
	// environment, as the URL does.
	env := append(os.Environ(), storeopen.EnvReadURL+"="+readURL, envReadMaxLag+"=10m")
	s := startIn(t, t.TempDir(), env, "serve", "--addr", "127.0.0.1:0", "--db", db, "--db-read-password-file", pwFile)

	status := func(path string) int {
		t.Helper()
		code, _ := get(t, s.url+path)
		return code
	}
	eventually := func(what string, cond func() bool) {
		t.Helper()
		s.eventually(t, 30*time.Second, what, cond)
	}
	stats := func() *replicaStats { t.Helper(); return readReplicaStats(t, s) }
	if st := stats(); st.MaxLagSeconds != 600 || st.ReadsFrom != "replica" || st.ReadsReason != "within_max_lag" {
		t.Fatalf("/stats with $%s=10m: %+v, want max_lag_seconds 600 and reads from the replica", envReadMaxLag, st)
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
	case <-time.After(readroute.CatchUpTimeout):
		t.Fatalf("verification still waiting after the replica resumed\n%s", s.log())
	}
	eventually("r2 readable once the lag dropped", func() bool { return status("/api/v1/sessions/r2") == 200 })
	eventually("lag back to 0", func() bool { return stats().LagBytes == 0 })

	standby.Stop(t)
	eventually("the stopped replica reported", func() bool {
		st := stats()
		return st.Problem == "unreachable" && st.ReadsFrom == "primary" && st.ReadsReason == "unreachable"
	})
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

// replicaStats is read_replica in /api/v1/stats.
type replicaStats struct {
	LagBytes      uint64  `json:"lag_bytes"`
	LagSeconds    float64 `json:"lag_seconds"`
	StaleSeconds  float64 `json:"stale_seconds"`
	MaxLagSeconds float64 `json:"max_lag_seconds"`
	ReadsFrom     string  `json:"reads_from"`
	ReadsReason   string  `json:"reads_reason"`
	Problem       string  `json:"problem"`
}

func readReplicaStats(t *testing.T, s *server) *replicaStats {
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

// TestReadReplicaMaxLag runs serve with --db-read-max-lag on a streaming
// standby whose replay is paused: once the replica has been missing the
// primary's WAL for longer than the limit, reads go to the primary (a
// session written after the pause is readable) and /stats and /metrics
// say so and why; once replay resumes, reads go back to the replica (a
// session written during a second pause is not readable at once).
func TestReadReplicaMaxLag(t *testing.T) {
	primary := pgtest.NewPrimary(t)
	standby := primary.NewStandby(t, "reader")
	db := primary.NewDatabase(t)
	migrateStore(t, db)
	readURL := strings.Replace(db, primary.Addr(), standby.Addr(), 1)
	waitReplayed(t, db, readURL)
	// 5 s: long enough that a read right after a write still finds the
	// reads on the replica on a loaded machine, short enough to wait out.
	const maxLag = 5 * time.Second
	s := startIn(t, t.TempDir(), os.Environ(), "serve", "--addr", "127.0.0.1:0", "--db", db, "--db-read", readURL, "--db-read-max-lag", maxLag.String())
	eventually := func(what string, cond func() bool) {
		t.Helper()
		s.eventually(t, 60*time.Second, what, cond)
	}
	stats := func() *replicaStats { t.Helper(); return readReplicaStats(t, s) }
	session := func(id string) (int, string) {
		t.Helper()
		code, body := get(t, s.url+"/api/v1/sessions/"+id)
		return code, string(body)
	}
	onReplica := func() bool {
		st := stats()
		return st.ReadsFrom == "replica" && st.ReadsReason == "within_max_lag" && st.StaleSeconds == 0
	}
	// written appends a session's first entry and reads it right away: a
	// read answered while /stats (asked after it) still says the replica
	// serves the reads was made on the replica.
	written := func(id string, i int) (code int, body string, st *replicaStats) {
		t.Helper()
		if code, out := post(t, s.url+"/api/v1/sessions/"+id+"/entries?agent_id=bot", entryJSON(i)); code != 201 {
			t.Fatalf("append %s: %d %v", id, code, out)
		}
		code, body = session(id)
		return code, body, stats()
	}

	if st := stats(); st.MaxLagSeconds != maxLag.Seconds() {
		t.Fatalf("/stats: max_lag_seconds %v, want %v", st.MaxLagSeconds, maxLag.Seconds())
	}
	eventually("reads on the caught-up replica", onReplica)

	standby.Exec(t, "SELECT pg_wal_replay_pause()")
	code, body, st := written("m1", 0)
	if st.ReadsFrom == "replica" && code != 404 {
		t.Fatalf("m1 read with replay paused while reads go to the replica: %d %s, want 404", code, body)
	}
	eventually("reads on the primary once the replica is staler than the limit", func() bool {
		st := stats()
		return st.ReadsFrom == "primary" && st.ReadsReason == "over_max_lag" && st.StaleSeconds > maxLag.Seconds() && st.LagBytes > 0
	})
	if code, body := session("m1"); code != 200 || !strings.Contains(body, `"session_id":"m1"`) || !strings.Contains(body, `"length":1`) {
		t.Errorf("m1 read from the primary: %d %s, want the session of one entry", code, body)
	}
	if code, body := get(t, s.url+"/api/v1/sessions?agent_id=bot"); code != 200 || !strings.Contains(string(body), `"session_id":"m1"`) {
		t.Errorf("session list from the primary: %d %s, want m1 in it", code, body)
	}
	_, metrics := get(t, s.url+"/metrics")
	for _, re := range []string{
		`(?m)^acsledger_db_read_serving\{[^}]*reason="over_max_lag",store="primary"[^}]*\} 1$`,
		`(?m)^acsledger_db_read_serving\{[^}]*reason="within_max_lag",store="replica"[^}]*\} 0$`,
		`(?m)^acsledger_db_read_stale_seconds(\{[^}]*\})? ([5-9]|[1-9][0-9]+)(\.[0-9]+)?(e\+[0-9]+)?$`,
	} {
		if !regexp.MustCompile(re).Match(metrics) {
			t.Errorf("/metrics lacks %s:\n%s", re, metrics)
		}
	}
	if !strings.Contains(s.log(), "staler than --db-read-max-lag") {
		t.Errorf("no warning in the log that reads went to the primary:\n%s", s.log())
	}

	standby.Exec(t, "SELECT pg_wal_replay_resume()")
	eventually("reads back on the replica once it replayed", onReplica)
	_, metrics = get(t, s.url+"/metrics")
	if re := `(?m)^acsledger_db_read_serving\{[^}]*reason="within_max_lag",store="replica"[^}]*\} 1$`; !regexp.MustCompile(re).Match(metrics) {
		t.Errorf("/metrics lacks %s:\n%s", re, metrics)
	}
	standby.Exec(t, "SELECT pg_wal_replay_pause()")
	code, body, st = written("m2", 1)
	if st.ReadsFrom != "replica" {
		t.Fatalf("reads went to the primary within %v of a write: %+v (machine too loaded?)\n%s", maxLag, st, s.log())
	}
	if code != 404 {
		t.Errorf("m2 read with replay paused again: %d %s, want 404 (reads on the replica)", code, body)
	}
	standby.Exec(t, "SELECT pg_wal_replay_resume()")
	eventually("m2 readable through the replica", func() bool { code, _ := session("m2"); return code == 200 })
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
	migrateStore(t, db)
	unreachable := "host=127.0.0.1 port=1 dbname=ledger user=acs password=" + dbSecret + " connect_timeout=2"
	for _, tc := range []struct {
		name string
		args []string
		env  string // one more NAME=value, if any
		want string
		code int
	}{
		{"unreachable replica", []string{"--db", db, "--db-read", unreachable}, "", "couldn't open the read replica host=127.0.0.1 port=1 dbname=ledger user=acs password=xxxxx", 1},
		{"embedded store", []string{"--db", t.TempDir(), "--db-read", db}, "", "not one", 1},
		{"directory as replica", []string{"--db", db, "--db-read", "./replica"}, "", "a read replica is a PostgreSQL URL", 1},
		{"negative max lag", []string{"--db", db, "--db-read", db, "--db-read-max-lag", "-1s"}, "", "--db-read-max-lag -1s: must be 0 (no limit) or positive", 2},
		{"malformed max lag", []string{"--db", db, "--db-read", db, "--db-read-max-lag", "soon"}, "", `invalid value "soon" for flag -db-read-max-lag`, 2},
		{"max lag without a replica", []string{"--db", db, "--db-read-max-lag", "5s"}, "", "--db-read-max-lag without a read replica", 2},
		{"malformed max lag in the environment", []string{"--db", db, "--db-read", db}, envReadMaxLag + "=5 seconds", `$ACSLEDGER_DB_READ_MAX_LAG "5 seconds": not a duration`, 2},
		{"negative max lag in the environment", []string{"--db", db, "--db-read", db}, envReadMaxLag + "=-30s", "$ACSLEDGER_DB_READ_MAX_LAG -30s: must be 0", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(binary, append([]string{"serve", "--addr", "127.0.0.1:0"}, tc.args...)...)
			cmd.Dir = t.TempDir()
			if tc.env != "" {
				cmd.Env = append(os.Environ(), tc.env)
			}
			out, err := cmd.CombinedOutput()
			if err == nil || strings.Contains(string(out), dbSecret) || !strings.Contains(string(out), tc.want) || cmd.ProcessState.ExitCode() != tc.code {
				t.Errorf("serve %v: %v\n%s\nwant exit %d naming %q, without the password", tc.args, err, out, tc.code, tc.want)
			}
		})
	}
}

// eventually polls cond every 100ms until it holds, failing t with the
// server's log if it does not within d.
func (s *server) eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v\n%s", what, d, s.log())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
