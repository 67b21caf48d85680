package replay_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/guardian/policy"
	"github.com/acsledger/acsledger/internal/pgtest"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/evidence/evidencetest"
	"github.com/acsledger/acsledger/ledger/evidence/replay"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// PermissiveVersion is a second recorded version of the baseline's policy
// id that allows everything.
const PermissiveVersion = "0.0.0-permissive"

func recordPermissive(t *testing.T, st ledger.GuardianStore) {
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
				// Every recorded decision replays to itself, found with or
				// without the session.
				for _, sid := range []string{"", step.SessionID} {
					res, err := replay.Replay(ctx, f.Store, replay.Request{RequestID: step.RequestID, SessionID: sid, Params: step.Params})
					if err != nil {
						t.Fatalf("replay %s %s: %v", step.Method, step.Decision, err)
					}
					if !res.Same || len(res.Diff) != 0 || string(res.Replayed.Disposition) != step.Decision || res.RecordedFrom != "response" || res.SessionID != step.SessionID {
						t.Errorf("replay of %s (%s): same=%v diff=%v replayed=%s from %s", step.Method, step.Decision, res.Same, res.Diff, res.Replayed.Disposition, res.RecordedFrom)
					}
				}
			}
			deny := f.Step(t, "steps/toolCallRequest", "deny")
			res, err := replay.Replay(ctx, f.Store, replay.Request{RequestID: deny.RequestID, Params: deny.Params, PolicyVersion: PermissiveVersion})
			if err != nil {
				t.Fatal(err)
			}
			if res.Same || res.ReplayedVersion != PermissiveVersion || res.RecordedVersion == PermissiveVersion ||
				len(res.Diff) == 0 || res.Diff[0] != `decision: "deny" != "allow"` {
				t.Errorf("under the permissive version: same=%v versions %s -> %s diff %q", res.Same, res.RecordedVersion, res.ReplayedVersion, res.Diff)
			}
			if strings.Join(res.NotReconstructed, ",") != "provenance" {
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
		{"no params", replay.Request{RequestID: deny.RequestID}, replay.ErrParamsRequired},
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
