package replay_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acsledger/acsledger/guardian/policy"
	"github.com/acsledger/acsledger/guardian/replay"
	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/internal/pgtest"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/storeopen"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// PermissiveVersion is a second recorded version of the baseline's policy
// id that allows everything.
const PermissiveVersion = "0.0.0-permissive"

func recordPermissive(t *testing.T, st storeopen.Store) {
	t.Helper()
	b := &policy.Bundle{ID: policy.BaselineID, Version: PermissiveVersion, Modules: map[string]string{
		"permit.rego": "package acs\n\ndecision := {\"decision\": \"allow\", \"rule_ids\": [\"permit.all\"]}\n",
	}}
	if _, err := policy.New(context.Background(), b, st, nil); err != nil {
		t.Fatalf("record the permissive bundle: %v", err)
	}
}

func TestReplay(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			f := evidencetest.New(t, kind)
			ctx := context.Background()
			recordPermissive(t, f.Store)
			for _, step := range f.Steps {
				// The params are stored exactly as sent.
				e, err := replay.FindEntry(ctx, f.Store, step.RequestID, step.SessionID)
				if err != nil {
					t.Fatal(err)
				}
				if b, err := f.Store.Request(ctx, e.SessionID, e.Position); err != nil || !bytes.Equal(b, step.Params) {
					t.Fatalf("stored params of %s: %s, %v; want %s", step.RequestID, b, err, step.Params)
				}
				// Every recorded decision replays to itself from the ledger
				// alone, found with or without the session, and with
				// supplied params too.
				for _, c := range []struct {
					sid    string
					params json.RawMessage
					from   string
				}{{"", nil, "ledger"}, {step.SessionID, nil, "ledger"}, {"", step.Params, "request"}} {
					res, err := replay.Replay(ctx, f.Store, replay.Request{RequestID: step.RequestID, SessionID: c.sid, Params: c.params})
					if err != nil {
						t.Fatalf("replay %s %s: %v", step.Method, step.Decision, err)
					}
					if !res.Same || len(res.Diff) != 0 || string(res.Replayed.Disposition) != step.Decision || res.RecordedFrom != "response" ||
						res.SessionID != step.SessionID || res.ParamsFrom != c.from || len(res.NotReconstructed) != 0 {
						t.Errorf("replay of %s (%s): same=%v diff=%v replayed=%s from %s, params from %s, not reconstructed %v",
							step.Method, step.Decision, res.Same, res.Diff, res.Replayed.Disposition, res.RecordedFrom, res.ParamsFrom, res.NotReconstructed)
					}
				}
			}
			deny := f.Step(t, "steps/toolCallRequest", "deny")
			res, err := replay.Replay(ctx, f.Store, replay.Request{RequestID: deny.RequestID, PolicyVersion: PermissiveVersion})
			if err != nil {
				t.Fatal(err)
			}
			if res.Same || res.ReplayedVersion != PermissiveVersion || res.RecordedVersion == PermissiveVersion ||
				len(res.Diff) == 0 || res.Diff[0] != `decision: "deny" != "allow"` {
				t.Errorf("under the permissive version: same=%v versions %s -> %s diff %q", res.Same, res.RecordedVersion, res.ReplayedVersion, res.Diff)
			}
			if len(res.NotReconstructed) != 0 {
				t.Errorf("not reconstructed: %v", res.NotReconstructed)
			}
		})
	}
}

func TestReplayRefuses(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	ctx := context.Background()
	deny := f.Step(t, "steps/toolCallRequest", "deny") // in the HMAC session
	other := f.Step(t, "steps/toolCallRequest", "allow")
	var p map[string]any
	_ = json.Unmarshal(deny.Params, &p)
	p["timestamp"] = "2020-01-01T00:00:00Z"
	edited, _ := json.Marshal(p)
	for _, c := range []struct {
		name string
		req  replay.Request
		want error
	}{
		{"another request's params", replay.Request{RequestID: deny.RequestID, Params: other.Params}, replay.ErrParamsMismatch},
		{"edited params", replay.Request{RequestID: deny.RequestID, Params: edited}, replay.ErrParamsMismatch},
		{"unknown request", replay.Request{RequestID: "no-such-request", Params: deny.Params}, ledger.ErrNotFound},
		{"unknown session", replay.Request{RequestID: deny.RequestID, SessionID: f.ECDSASession, Params: deny.Params}, ledger.ErrNotFound},
		{"unknown version", replay.Request{RequestID: deny.RequestID, Params: deny.Params, PolicyVersion: "9.9.9"}, ledger.ErrNotFound},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := replay.Replay(ctx, f.Store, c.req)
			if !errors.Is(err, c.want) {
				t.Errorf("err %v, want %v", err, c.want)
			}
		})
	}
}

// clockBundle decides on the time and on the provenance the Guardian
// showed it, and says both in its reasoning, so that a replay matches only
// if the recorded time.now_ns value and the rebuilt provenance are exact.
var clockBundle = &policy.Bundle{ID: "clock", Version: "1", Modules: map[string]string{
	"clock.rego": `package acs

decision := {
	"decision": "allow",
	"rule_ids": ["clock.now"],
	"reasoning": sprintf("evaluated at %d with %d provenance objects", [time.now_ns(), count(input.provenance)]),
}
`,
}}

// TestReplayTimeNowNS replays decisions of a policy calling time.now_ns,
// whose values (about 1.8e18) are above 2^53: the cache must come back
// from the ledger byte for byte, as a JSON string in the entry, for the
// replayed reasoning to match the recorded one.
func TestReplayTimeNowNS(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			f := evidencetest.NewWithPolicy(t, kind, clockBundle)
			sawProvenance := false
			for _, step := range f.Steps {
				e, err := replay.FindEntry(ctx, f.Store, step.RequestID, step.SessionID)
				if err != nil {
					t.Fatal(err)
				}
				var entry struct {
					Decision struct {
						Cache json.RawMessage `json:"nd_builtin_cache"`
					} `json:"decision"`
				}
				if err := json.Unmarshal(e.Content, &entry); err != nil {
					t.Fatal(err)
				}
				var cache string
				if err := json.Unmarshal(entry.Decision.Cache, &cache); err != nil {
					t.Fatalf("nd_builtin_cache of %s is not a JSON string: %s", step.RequestID, entry.Decision.Cache)
				}
				// The engine's encoding: {"time.now_ns":[[[],<ns>]]}.
				var ns int64
				if _, err := fmt.Sscanf(cache, `{"time.now_ns":[[[],%d]]}`, &ns); err != nil || ns < 1<<60 || fmt.Sprintf(`{"time.now_ns":[[[],%d]]}`, ns) != cache {
					t.Fatalf("recorded cache %q is not one exact time.now_ns call", cache)
				}

				res, err := replay.Replay(ctx, f.Store, replay.Request{RequestID: step.RequestID})
				if err != nil {
					t.Fatalf("replay %s: %v", step.RequestID, err)
				}
				wantReason := fmt.Sprintf("evaluated at %d with ", ns)
				if !res.Same || len(res.Diff) != 0 || !strings.HasPrefix(res.Replayed.Reasoning, wantReason) || res.Replayed.Reasoning != res.Recorded.Reasoning {
					t.Errorf("replay of %s: same=%v diff=%q reasoning %q, want it to start %q", step.RequestID, res.Same, res.Diff, res.Replayed.Reasoning, wantReason)
				}
				if string(res.Replayed.NDBuiltinCache) != cache {
					t.Errorf("replay of %s used cache %s, recorded %s", step.RequestID, res.Replayed.NDBuiltinCache, cache)
				}
				if !strings.HasSuffix(res.Recorded.Reasoning, " 0 provenance objects") {
					sawProvenance = true
				}
			}
			// The fixture's later steps see the first step's provenance:
			// replay matched them only by rebuilding it from stored params.
			if !sawProvenance {
				t.Error("no step saw provenance: the test does not exercise its reconstruction")
			}
		})
	}
}

// TestReplayStoredParams tampers with stored params behind the store's
// back (dropping the SQLite trigger, as only someone holding the file can):
// a changed blob is reported, never evaluated. Params erased through the
// store (EraseParams) need the caller's params, the refusal says when and
// why they were erased, and the provenance of later steps is then named as
// not reconstructed. Params never stored are ErrParamsRequired.
func TestReplayStoredParams(t *testing.T) {
	ctx := context.Background()
	f := evidencetest.New(t, "sqlite")
	deny := f.Step(t, "steps/toolCallRequest", "deny")
	first := f.Step(t, "steps/toolCallRequest", "allow")
	if first.SessionID != deny.SessionID {
		t.Fatal("the fixture's first allow and deny are in different sessions")
	}
	db, err := sql.Open("sqlite", filepath.Join(strings.TrimPrefix(f.URL, "sqlite:"), storeopen.SQLiteFile))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pos := func(s evidencetest.Step) int64 {
		e, err := replay.FindEntry(ctx, f.Store, s.RequestID, s.SessionID)
		if err != nil {
			t.Fatal(err)
		}
		return e.Position
	}
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec("DROP TRIGGER request_params_no_update")

	// Stored params that are not the recorded request.
	exec("UPDATE request_params SET params = ? WHERE session_id = ? AND position = ?", []byte(first.Params), deny.SessionID, pos(deny))
	for _, params := range []json.RawMessage{nil, deny.Params} {
		if _, err := replay.Replay(ctx, f.Store, replay.Request{RequestID: deny.RequestID, Params: params}); !errors.Is(err, replay.ErrStoredParamsMismatch) {
			t.Errorf("tampered stored params (supplied %d bytes): %v", len(params), err)
		}
	}

	// Erased params.
	const reason = "data subject request #7"
	erasure, err := f.Store.EraseParams(ctx, deny.SessionID, pos(deny), reason, "dpo")
	if err != nil {
		t.Fatal(err)
	}
	_, err = replay.Replay(ctx, f.Store, replay.Request{RequestID: deny.RequestID})
	var ee *ledger.ErasedError
	if !errors.As(err, &ee) || errors.Is(err, replay.ErrParamsRequired) || ee.Erasure.Reason != reason {
		t.Errorf("erased params, none supplied: %v; want a *ledger.ErasedError", err)
	}
	for _, part := range []string{deny.RequestID, "erased at " + erasure.ErasedAt.Format(time.RFC3339Nano), reason, `by "dpo"`, "supply the params"} {
		if err == nil || !strings.Contains(err.Error(), part) {
			t.Errorf("error %q does not say %q", err, part)
		}
	}
	res, err := replay.Replay(ctx, f.Store, replay.Request{RequestID: deny.RequestID, Params: deny.Params})
	if err != nil || !res.Same || res.ParamsFrom != "request" || len(res.NotReconstructed) != 0 {
		t.Fatalf("erased params, supplied: %+v, %v", res, err)
	}
	if _, err := replay.Replay(ctx, f.Store, replay.Request{RequestID: deny.RequestID, Params: first.Params}); !errors.Is(err, replay.ErrParamsMismatch) {
		t.Errorf("erased params, other ones supplied: %v, want ErrParamsMismatch", err)
	}
	// A later step's input lacks the erased step's provenance.
	if _, err := f.Store.EraseParams(ctx, first.SessionID, pos(first), reason, ""); err != nil {
		t.Fatal(err)
	}
	later := f.Step(t, "steps/userMessage", "modify")
	res, err = replay.Replay(ctx, f.Store, replay.Request{RequestID: later.RequestID})
	if err != nil || res.ParamsFrom != "ledger" || strings.Join(res.NotReconstructed, ",") != "provenance" {
		t.Fatalf("after erasing earlier params: %+v, %v", res, err)
	}

	// Params never stored (an entry appended without them).
	if _, err := f.Store.Append(ctx, ledger.Record{SessionID: "plain", AgentID: "a", Entry: []byte(
		`{"entry_id":"e-plain","step_id":"r-plain","step_type":"steps/toolCallRequest","timestamp":"2026-11-30T10:00:00Z","request_hash":"0000000000000000000000000000000000000000000000000000000000000000"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := replay.Replay(ctx, f.Store, replay.Request{RequestID: "r-plain"}); !errors.Is(err, replay.ErrParamsRequired) || errors.Is(err, ledger.ErrErased) {
		t.Errorf("params never stored: %v, want ErrParamsRequired", err)
	}
}

// TestFindEntry looks request ids up with and without a session, on both
// stores: one match is the entry, none is ledger.ErrNotFound, and a
// request id that is a step of several sessions is ErrAmbiguous naming
// two of them unless the session is named.
func TestFindEntry(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			st := findLedger(t, kind)
			for _, c := range []struct {
				name, requestID, session string
				wantSession              string
				wantPos                  int64
				wantErr                  error
				wantMsg                  string
			}{
				{"one session", "r-only", "", "sess-b", 1, nil, ""},
				{"one session, named", "r-only", "sess-b", "sess-b", 1, nil, ""},
				{"several sessions", "r-shared", "", "", 0, replay.ErrAmbiguous, "request_id r-shared is a step of sessions sess-a and sess-b"},
				{"several sessions, one named", "r-shared", "sess-c", "sess-c", 2, nil, ""},
				{"unknown request", "r-none", "", "", 0, ledger.ErrNotFound, "no entry has step_id r-none"},
				{"not in the named session", "r-only", "sess-a", "", 0, ledger.ErrNotFound, "session sess-a has no entry with step_id r-only"},
				{"unknown session", "r-shared", "sess-none", "", 0, ledger.ErrNotFound, "session sess-none has no entry with step_id r-shared"},
			} {
				t.Run(c.name, func(t *testing.T) {
					e, err := replay.FindEntry(ctx, st, c.requestID, c.session)
					if c.wantErr != nil {
						if !errors.Is(err, c.wantErr) || !strings.Contains(err.Error(), c.wantMsg) {
							t.Fatalf("err %v, want %v saying %q", err, c.wantErr, c.wantMsg)
						}
						return
					}
					if err != nil || e.SessionID != c.wantSession || e.Position != c.wantPos || e.StepID != c.requestID ||
						!strings.Contains(string(e.Content), fmt.Sprintf(`"entry_id":"%s/%s"`, c.wantSession, c.requestID)) {
						t.Fatalf("got %s position %d %s, %v; want %s position %d", e.SessionID, e.Position, e.Content, err, c.wantSession, c.wantPos)
					}
				})
			}
		})
	}
}

// emptyLedger opens a fresh, migrated store of kind ("sqlite" or
// "postgres"), closed when the test ends.
func emptyLedger(tb testing.TB, kind string) ledger.Store {
	tb.Helper()
	ctx := context.Background()
	url := "sqlite:" + tb.TempDir()
	if kind == "postgres" {
		url = pgtest.NewDatabase(tb)
		if err := storeopen.Migrate(ctx, url); err != nil {
			tb.Fatal(err)
		}
	}
	st, err := storeopen.Open(ctx, url, ledger.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}

// findLedger returns a store where r-shared is a step of sess-a
// (position 0), sess-b (0) and sess-c (2), and r-only of sess-b (1).
func findLedger(t *testing.T, kind string) ledger.Store {
	t.Helper()
	ctx := context.Background()
	st := emptyLedger(t, kind)
	var rs []ledger.Record
	for _, s := range []struct{ session, step string }{
		{"sess-c", "r-c0"}, {"sess-c", "r-c1"}, {"sess-b", "r-shared"}, {"sess-a", "r-shared"},
		{"sess-b", "r-only"}, {"sess-c", "r-shared"},
	} {
		rs = append(rs, ledger.Record{SessionID: s.session, AgentID: "agent-7", Entry: fmt.Appendf(nil,
			`{"entry_id":"%s/%s","step_id":"%s","step_type":"steps/toolCallRequest","timestamp":"2026-11-30T10:00:00Z"}`, s.session, s.step, s.step)})
	}
	if _, err := st.AppendBatch(ctx, rs); err != nil {
		t.Fatal(err)
	}
	return st
}
