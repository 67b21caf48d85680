package witness_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/acsledger/acsledger/internal/tlogdb"
	"github.com/acsledger/acsledger/ledger/tlog"
	"github.com/acsledger/acsledger/ledger/tlog/tlogtest"
	"github.com/acsledger/acsledger/ledger/tlog/witness"
	"github.com/acsledger/acsledger/verify"
	"golang.org/x/mod/sumdb/note"
)

// switchable serves h, or drops the connection while down.
type switchable struct {
	h    http.Handler
	down atomic.Bool
}

func (s *switchable) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.down.Load() {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	s.h.ServeHTTP(w, r)
}

// TestWitnessPolicyHoldsPublication runs a log held by a witness policy
// needing both of two real witnesses (the handler `acsledger witness`
// serves): while one is down, checkpoints are signed but not published
// (not served, not proven), and publication catches up when it returns,
// also across a restart of the log.
func TestWitnessPolicyHoldsPublication(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := tlogdb.SQLite(t)
	lskey, lvkey, _ := tlog.KeyFromSeed(tlogtest.Origin, tlog.Ed25519, tlogtest.Seed("log"))
	var lines []string
	wits := make([]*switchable, 2)
	for i := range wits {
		name := fmt.Sprintf("witness.test/w%d", i+1)
		wskey, wvkey, _ := tlog.KeyFromSeed(name, tlog.CosignatureEd25519, tlogtest.Seed(name))
		w, err := witness.New(witness.Config{Key: wskey, Logs: []witness.Log{{Origin: tlogtest.Origin, VerifierKeys: []string{lvkey}}},
			StatePath: filepath.Join(t.TempDir(), "state.json"), Now: clock})
		if err != nil {
			t.Fatal(err)
		}
		wits[i] = &switchable{h: w}
		srv := httptest.NewServer(wits[i])
		t.Cleanup(srv.Close)
		lines = append(lines, fmt.Sprintf("witness W%d %s %s", i+1, wvkey, srv.URL))
	}
	policy, err := tlog.ParseWitnessPolicy([]byte(fmt.Sprintf("# both must cosign\nlog %s\n%s\n%s\ngroup both all W1 W2\nquorum both\n", lvkey, lines[0], lines[1])))
	if err != nil {
		t.Fatal(err)
	}
	open := func() *tlog.Log {
		l, err := tlog.New(ctx, st.LogStorage(), tlog.Config{Origin: tlogtest.Origin, Keys: []string{lskey}, WitnessPolicy: policy})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := open()
	round := func(l *tlog.Log, from, n int64) {
		tlogdb.AppendSQLite(t, st, "s", from, n)
		tlogtest.IntegrateAll(t, l)
		l.Witness(ctx)
	}
	want := func(l *tlog.Log, published, signed uint64) {
		t.Helper()
		p, err := l.Publication(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if p != (tlog.Publication{Policy: true, Published: published, Signed: signed, Integrated: signed}) {
			t.Fatalf("publication %+v, want published %d, signed %d", p, published, signed)
		}
		cp, err := l.Checkpoint(ctx)
		if published == 0 {
			if !errors.Is(err, tlog.ErrNotFound) {
				t.Fatalf("checkpoint before any is published: %v", err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		c, fs, err := verify.VerifyCheckpoint(cp, &verify.CheckpointPolicy{LogKeys: []string{lvkey}, Witnesses: policy.VerifierKeys(), WitnessQuorum: 2}, "checkpoint")
		if err != nil || len(fs) != 0 || c.Size != published {
			t.Fatalf("served checkpoint: size %d, findings %v, err %v\n%s", c.Size, fs, err, cp)
		}
	}

	wits[1].down.Store(true)
	round(l, 0, 5)
	want(l, 0, 5)
	if _, _, err := l.EntryProof(ctx, "s", 4); !errors.Is(err, tlog.ErrNotFound) {
		t.Fatalf("proof against an unpublished checkpoint: %v", err)
	}
	if _, err := l.FirstAnchorOf(ctx, "s", 4); !errors.Is(err, tlog.ErrNotFound) {
		t.Fatalf("receipt anchor in an unpublished checkpoint: %v", err)
	}
	wits[1].down.Store(false)
	l.Witness(ctx)
	want(l, 5, 5)

	wits[1].down.Store(true)
	round(l, 5, 5)
	want(l, 5, 10) // signed, not published
	if _, err := l.InclusionProof(ctx, 7, 10); !errors.Is(err, tlog.ErrBadRange) {
		t.Fatalf("inclusion proof in the unpublished tree: %v", err)
	}
	if _, err := l.CheckpointAt(ctx, 10); !errors.Is(err, tlog.ErrNotFound) {
		t.Fatalf("unpublished checkpoint served by size: %v", err)
	}
	if a, err := l.FirstAnchorOf(ctx, "s", 4); err != nil || a.Size != 5 {
		t.Fatalf("receipt anchor of a published entry: size %d, %v; want 5", a.Size, err)
	}
	if _, err := l.FirstAnchorOf(ctx, "s", 7); !errors.Is(err, tlog.ErrNotFound) {
		t.Fatalf("receipt anchor of an entry only in an unpublished checkpoint: %v", err)
	}
	doc, _, err := l.EntryProof(ctx, "s", 4)
	if err != nil || !strings.Contains(string(doc), "\n5\n") {
		t.Fatalf("proof against the published checkpoint: %v\n%s", err, doc)
	}

	// A restart finds the published checkpoint again (10 has only W1's
	// cosignature), and publication resumes when W2 is back.
	l = open()
	want(l, 5, 10)
	wits[1].down.Store(false)
	l.Witness(ctx)
	want(l, 10, 10)
	if a, err := l.FirstAnchorOf(ctx, "s", 7); err != nil || a.Size != 10 {
		t.Fatalf("receipt anchor once published: size %d, %v; want 10", a.Size, err)
	}
}

func TestParseWitnessPolicy(t *testing.T) {
	t.Parallel()
	_, v1, _ := tlog.KeyFromSeed("w1", tlog.CosignatureEd25519, tlogtest.Seed("w1"))
	_, v2, _ := tlog.KeyFromSeed("w2", tlog.CosignatureMLDSA44, tlogtest.Seed("w2"))
	_, lv, _ := tlog.KeyFromSeed(tlogtest.Origin, tlog.Ed25519, tlogtest.Seed("log"))
	hexKey := strings.Repeat("ab", 32)
	good := fmt.Sprintf(`# a policy
log %s https://log.example/
witness A %s https://a.example/   # trailing comment
witness B %s
witness C %s
group AB any A B
group two 2 AB C
quorum two
`, lv, v1, v2, hexKey)
	p, err := tlog.ParseWitnessPolicy([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Witnesses) != 3 || p.Witnesses[0].URL != "https://a.example/" || p.Witnesses[1].URL != "" || !strings.HasPrefix(p.Witnesses[2].VerifierKey, "C+") {
		t.Fatalf("witnesses %+v", p.Witnesses)
	}
	if !p.NamesLog([]string{lv}) || p.NamesLog([]string{v1}) {
		t.Fatal("NamesLog")
	}
	if got := p.MinWitnesses(); got != 2 {
		t.Errorf("MinWitnesses of 2 of (any A B, C) = %d, want 2", got)
	}
	// A verifier key that happens to be 64 characters long is a verifier
	// key, not hex.
	_, v64, _ := tlog.KeyFromSeed("w1.example", tlog.CosignatureEd25519, tlogtest.Seed("w64"))
	if len(v64) != 64 {
		t.Fatalf("test key is %d characters", len(v64))
	}
	if _, err := tlog.ParseWitnessPolicy([]byte("witness A " + v64 + "\nquorum A\n")); err != nil {
		t.Errorf("64-character verifier key: %v", err)
	}
	none, err := tlog.ParseWitnessPolicy([]byte("quorum none\n"))
	if err != nil || none.MinWitnesses() != 0 || !none.Satisfied([]byte("x\n\n"), nil) {
		t.Fatalf("quorum none: %v", err)
	}
	for _, tc := range []struct{ policy, want string }{
		{"quorum none\nfoo bar\n", "line 2, field 1: unknown keyword \"foo\""},
		{"witness A " + v1 + "\n", "no quorum line"},
		{"witness A " + v1 + "\nwitness A " + v2 + "\nquorum A\n", "line 2, field 2: name \"A\" is already defined"},
		{"witness A " + v1 + "\nwitness B " + v1 + "\nquorum A\n", "line 2, field 3: witness \"B\" has the same key as witness \"A\""},
		{"witness A " + v1 + "\ngroup G any A X\nquorum G\n", "line 2, field 5: member \"X\" is not defined on an earlier line"},
		{"witness A " + v1 + "\ngroup G 2 A\nquorum G\n", "line 2, field 3: threshold \"2\""},
		{"witness A " + v1 + "\ngroup G 01 A\nquorum G\n", "line 2, field 3: threshold \"01\""},
		{"witness A " + v1 + "\ngroup G any A A\nquorum G\n", "line 2, field 5: member \"A\" is listed twice"},
		{"quorum G\ngroup G any\n", "line 1, field 2: quorum \"G\" is not defined"},
		{"quorum none\nquorum none\n", "line 2, field 1: a second quorum line"},
		{"witness A nothex\nquorum A\n", "line 1, field 3: witness key"},
		{"witness A " + strings.Repeat("AB", 32) + "\nquorum A\n", "line 1, field 3: witness key: 64 characters but not lowercase hex"},
		{"witness A " + lv + "\nquorum A\n", "line 1, field 3: witness key is of type 0x01"},
		{"witness A " + v1 + " ftp://x\nquorum A\n", "line 1, field 4: witness URL"},
		{"witness A " + v1 + " https://u:p@x/\nquorum A\n", "line 1, field 4: witness URL: a URL must not carry user information"},
		{"witness none " + v1 + "\nquorum none\n", "line 1, field 2: \"none\" is predefined"},
		{"log\nquorum none\n", "line 1: want \"log <key> [<url>]\""},
	} {
		_, err := tlog.ParseWitnessPolicy([]byte(tc.policy))
		var pe *tlog.PolicyError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want a PolicyError containing %q", tc.policy, err, tc.want)
		}
	}
}

// TestWitnessPolicySatisfied evaluates nested groups over real
// cosignatures of each key type, a hex (Sigsum-style) key among them; a
// forged line counts for nothing and spoils nothing else.
func TestWitnessPolicySatisfied(t *testing.T) {
	t.Parallel()
	lskey, _, _ := tlog.KeyFromSeed(tlogtest.Origin, tlog.Ed25519, tlogtest.Seed("log"))
	type wit struct{ name, skey, vkey string }
	mk := func(name string, alg tlog.Algorithm) wit {
		s, v, _ := tlog.KeyFromSeed(name, alg, tlogtest.Seed(name))
		return wit{name, s, v}
	}
	a, b, c := mk("A", tlog.CosignatureEd25519), mk("B", tlog.CosignatureMLDSA44), mk("C", tlog.CosignatureEd25519)
	cHex := fmt.Sprintf("%x", mustPub(t, c.vkey))
	p, err := tlog.ParseWitnessPolicy([]byte(fmt.Sprintf("witness A %s\nwitness B %s\nwitness C %s\ngroup AB any A B\ngroup two 2 AB C\nquorum two\n", a.vkey, b.vkey, cHex)))
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := tlog.NewSigner(lskey, clock)
	signed, err := note.Sign(&note.Note{Text: tlogtest.Origin + "\n3\n" + strings.Repeat("A", 43) + "=\n"}, signer)
	if err != nil {
		t.Fatal(err)
	}
	line := func(w wit) []byte {
		s, _ := tlog.NewSigner(w.skey, clock)
		n, err := note.Sign(&note.Note{Text: tlogtest.Origin + "\n3\n" + strings.Repeat("A", 43) + "=\n"}, s)
		if err != nil {
			t.Fatal(err)
		}
		_, sig, _ := strings.Cut(string(n), "\n\n")
		return []byte(sig)
	}
	// C's line with one byte of its signature changed: C's key ID, a
	// signature that does not verify.
	cl := strings.TrimSuffix(strings.TrimPrefix(string(line(c)), "\u2014 C "), "\n")
	raw, _ := base64.StdEncoding.DecodeString(cl)
	raw[len(raw)-1] ^= 1
	forged := []byte("\u2014 C " + base64.StdEncoding.EncodeToString(raw) + "\n")
	for _, tc := range []struct {
		lines [][]byte
		want  bool
	}{
		{nil, false},
		{[][]byte{line(a)}, false},
		{[][]byte{line(a), line(b)}, false},
		{[][]byte{line(a), line(c)}, true},
		{[][]byte{line(b), line(c)}, true},
		{[][]byte{forged, line(b), line(c)}, true},
		{[][]byte{line(a), forged}, false},
	} {
		if got := p.Satisfied(signed, tc.lines); got != tc.want {
			t.Errorf("%d lines %q: satisfied %v, want %v", len(tc.lines), tc.lines, got, tc.want)
		}
	}
}

// mustPub returns the public key bytes of a signed-note verifier key.
func mustPub(t *testing.T, vkey string) []byte {
	t.Helper()
	parts := strings.SplitN(vkey, "+", 3)
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil {
		t.Fatal(err)
	}
	return raw[1:]
}
