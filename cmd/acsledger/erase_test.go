package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	decisionreplay "github.com/acsledger/acsledger/guardian/replay"
	"github.com/acsledger/acsledger/ingest"
	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/evidence"
	"github.com/acsledger/acsledger/verify"
)

// TestEraseCommand erases a step's params with the command, on both
// stores: the params are gone and the erasure recorded, a second erasure
// and one where nothing is stored fail, replay says the params were
// erased, and the session's bundle still verifies with no findings.
func TestEraseCommand(t *testing.T) {
	storeKinds(t, func(t *testing.T, kind string) {
		ctx := context.Background()
		f := evidencetest.New(t, kind)
		deny := f.Step(t, "steps/toolCallRequest", "deny")
		e, err := decisionreplay.FindEntry(ctx, f.Store, deny.RequestID, deny.SessionID)
		if err != nil {
			t.Fatal(err)
		}
		pos := strconv.FormatInt(e.Position, 10)
		const reason = "data subject request #42"
		erase := func(args ...string) (int, string, string) {
			var stdout, stderr bytes.Buffer
			code := run(ctx, append([]string{"erase"}, args...), &stdout, &stderr)
			return code, stdout.String(), stderr.String()
		}
		for _, c := range []struct {
			name string
			args []string
			want string
		}{
			{"no db", []string{"--session", deny.SessionID, "--position", pos, "--reason", reason}, "--db is required"},
			{"no session", []string{"--db", f.URL, "--position", pos, "--reason", reason}, "--session is required"},
			{"no position", []string{"--db", f.URL, "--session", deny.SessionID, "--reason", reason}, "--position is required"},
			{"no reason", []string{"--db", f.URL, "--session", deny.SessionID, "--position", pos}, "--reason is required"},
			{"blank reason", []string{"--db", f.URL, "--session", deny.SessionID, "--position", pos, "--reason", "  "}, "must not be blank"},
			{"bad position", []string{"--db", f.URL, "--session", deny.SessionID, "--position", "one", "--reason", reason}, "invalid value"},
			{"stray argument", []string{"--db", f.URL, "--session", deny.SessionID, "--position", pos, "--reason", reason, "extra"}, `unexpected argument "extra"`},
		} {
			if code, _, stderr := erase(c.args...); code != 2 || !strings.Contains(stderr, c.want) {
				t.Errorf("%s: exit %d, stderr %q; want exit 2 saying %q", c.name, code, stderr, c.want)
			}
		}
		if _, err := f.Store.Request(ctx, deny.SessionID, e.Position); err != nil {
			t.Fatalf("params after refused invocations: %v", err)
		}

		code, stdout, stderr := erase("--db", f.URL, "--session", deny.SessionID, "--position", pos, "--reason", reason, "--by", "dpo")
		if code != 0 || !strings.Contains(stdout, "erased the request params of session "+deny.SessionID+" position "+pos) {
			t.Fatalf("erase: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
		}
		_, err = f.Store.Request(ctx, deny.SessionID, e.Position)
		var ee *ledger.ErasedError
		if !errors.As(err, &ee) || ee.Erasure.Reason != reason || ee.Erasure.ErasedBy != "dpo" {
			t.Fatalf("params after the erase command: %v", err)
		}

		// Again: refused, naming the first erasure.
		code, _, stderr = erase("--db", f.URL, "--session", deny.SessionID, "--position", pos, "--reason", "again")
		if code != 1 || !strings.Contains(stderr, "were erased at") || !strings.Contains(stderr, reason) {
			t.Errorf("second erase: exit %d, stderr %q", code, stderr)
		}
		// Nothing stored there.
		code, _, stderr = erase("--db", f.URL, "--session", deny.SessionID, "--position", "99", "--reason", reason)
		if code != 1 || !strings.Contains(stderr, "not found") {
			t.Errorf("erase where nothing is stored: exit %d, stderr %q", code, stderr)
		}

		// Replay without params says they were erased; with them, works.
		var rout, rerr bytes.Buffer
		if code := run(ctx, []string{"replay", "--db", f.URL, deny.RequestID}, &rout, &rerr); code != 1 || !strings.Contains(rerr.String(), "were erased at") {
			t.Errorf("replay of the erased step: exit %d, stderr %q", code, rerr.String())
		}
		paramsFile := filepath.Join(t.TempDir(), "params.json")
		if err := os.WriteFile(paramsFile, deny.Params, 0o600); err != nil {
			t.Fatal(err)
		}
		rout.Reset()
		rerr.Reset()
		if code := run(ctx, []string{"replay", "--db", f.URL, "--params", paramsFile, deny.RequestID}, &rout, &rerr); code != 0 ||
			!strings.Contains(rout.String(), "params from the --params file\nsame decision: deny") {
			t.Errorf("replay of the erased step with --params: exit %d\nstdout %s\nstderr %s", code, rout.String(), rerr.String())
		}

		// The session's chain, responses and anchoring still verify.
		var bundle bytes.Buffer
		if _, err := evidence.Build(ctx, f.Store, f.Log, deny.SessionID, &bundle, f.Options()); err != nil {
			t.Fatal(err)
		}
		rep, err := verify.VerifyBundle(bytes.NewReader(bundle.Bytes()), f.Trust(t))
		if err != nil || !rep.Verified() || len(rep.Findings) != 0 {
			t.Fatalf("bundle after the erasure: %v, findings %v", err, rep.Findings)
		}

		// --source: an ingested OPA decision's source record (its input
		// names a person) is erased; the entry stays.
		rec := ingest.OPAMapper{}.Map(ctx, ingest.Raw{File: "upload.json", Record: 1,
			Bytes: []byte(`{"decision_id":"d-erase","input":{"session_id":"sess-erase","user":"alice@example.org"},"result":true,"timestamp":"2026-12-01T10:00:00Z"}`)})
		if res, err := f.Store.Ingest(ctx, []ledger.IngestRecord{rec}); err != nil || res[0].Status != ledger.IngestAccepted {
			t.Fatalf("ingest: %+v, %v", res, err)
		}
		code, _, stderr = erase("--db", f.URL, "--session", "sess-erase", "--position", "0", "--reason", reason)
		if code != 1 || !strings.Contains(stderr, "not found") {
			t.Errorf("erase of an ingested entry's params: exit %d, stderr %q", code, stderr)
		}
		code, stdout, stderr = erase("--db", f.URL, "--session", "sess-erase", "--position", "0", "--reason", reason, "--by", "dpo", "--source")
		if code != 0 || !strings.Contains(stdout, "erased the source record of session sess-erase position 0") {
			t.Fatalf("erase --source: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
		}
		if _, err := f.Store.Source(ctx, "sess-erase", 0); !errors.As(err, &ee) || ee.Erasure.ErasedBy != "dpo" || ee.Erasure.Reason != reason {
			t.Fatalf("source after erase --source: %v", err)
		}
		code, _, stderr = erase("--db", f.URL, "--session", "sess-erase", "--position", "7", "--reason", reason, "--source")
		if code != 1 || !strings.Contains(stderr, `session "sess-erase" position 7`) || !strings.Contains(stderr, "no entry") {
			t.Errorf("erase --source of an unknown entry: exit %d, stderr %q", code, stderr)
		}
	})
}
