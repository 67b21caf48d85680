package storetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/paramcrypt"
)

// guardianTests are the tests of what the Guardian keeps beside the entries.
var guardianTests = []struct {
	name string
	fn   func(*testing.T, Roles, *Clock)
}{
	{"AppendRequestSigned", testAppendRequestSigned},
	{"AppendRequestSignedConcurrent", testAppendRequestSignedConcurrent},
	{"RecordRequest", testRecordRequest},
	{"AppendRequest", testAppendRequest},
	{"AppendRequestConcurrent", testAppendRequestConcurrent},
	{"PolicyBundles", testPolicyBundles},
	{"EraseParams", testEraseParams},
	{"EraseParamsConcurrent", testEraseParamsConcurrent},
	{"SearchToolOfSealedParams", testSearchToolOfSealedParams},
}

// runGuardian runs the Guardian's tests with request params encrypted at
// rest, as a deployment stores them: every read of params decrypts.
func runGuardian(t *testing.T, open Open) {
	sealer, err := paramcrypt.New(TestMasterKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range guardianTests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := NewClock()
			tc.fn(t, open(t, ledger.Options{Now: clock.Now, Params: sealer}), clock)
		})
	}
}

// TestMasterKey is the master key the suite encrypts params with.
var TestMasterKey = []byte("acsledger storetest master key!!")

// requestKey is a replay key with request id id, for appends whose
// subject is not the replay check.
func requestKey(id string) ledger.Seen {
	return ledger.Seen{RequestID: id, At: time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)}
}

// testAppendRequestSigned: the response and params are stored beside the
// entry, byte for byte, and nothing is when the signer fails or the step
// is refused.
func testAppendRequestSigned(t *testing.T, s Roles, _ *Clock) {
	ctx := context.Background()
	fx := Fixtures(t)
	calls := 0
	sign := func(a ledger.Appended) ([]byte, error) {
		calls++
		return fmt.Appendf(nil, `{"result":{"chain_hash":%q,"position":%d}}`, a.EntryHash, a.Position), nil
	}
	// Mixed with plain appends of the Guardian (its intent entries) in one
	// chain.
	if _, err := s.Append(ctx, ledger.Record{SessionID: "s", AgentID: "a", Entry: fx[0], Writer: ledger.WriterGuardian}); err != nil {
		t.Fatal(err)
	}
	head, _ := s.Session(ctx, "s")
	_, want := oracle(t, fx[1], &head.Head)
	// The params are stored byte for byte: member order, spacing, escapes
	// and digits past 2^53 as received.
	params := []byte("{\"b\": 1796016335809982101, \"a\":\"\\u00e9\"}\n")
	got, resp, err := s.AppendRequest(ctx, ledger.Record{SessionID: "s", Entry: fx[1]}, params, requestKey("req-1"), sign)
	if err != nil {
		t.Fatal(err)
	}
	wantResp := fmt.Sprintf(`{"result":{"chain_hash":%q,"position":1}}`, want)
	if got.Position != 1 || got.EntryHash != want || got.Replayed || string(resp) != wantResp || calls != 1 {
		t.Fatalf("AppendRequest: %+v, %s, %d sign calls", got, resp, calls)
	}
	if b, err := s.Response(ctx, "s", 1); err != nil || string(b) != wantResp {
		t.Fatalf("Response: %s, %v", b, err)
	}
	if _, err := s.Response(ctx, "s", 0); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("Response of an entry appended without one: %v", err)
	}
	if b, err := s.Request(ctx, "s", 1); err != nil || string(b) != string(params) {
		t.Fatalf("Request: %q, %v; want %q", b, err, params)
	}
	for _, pos := range []int64{0, 2} {
		if b, err := s.Request(ctx, "s", pos); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("Request at %d (no params stored there): %q, %v", pos, b, err)
		}
	}
	if _, err := s.Request(ctx, "other", 1); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("Request of another session: %v", err)
	}

	// A retry of the step is a replay, refused without signing; the
	// params stored first stay.
	_, resp, err = s.AppendRequest(ctx, ledger.Record{SessionID: "s", Entry: fx[1]}, []byte(`{"other":true}`), requestKey("req-1-retry"), sign)
	if !errors.Is(err, ledger.ErrReplay) || resp != nil || calls != 1 {
		t.Fatalf("retry: %s, %v, %d sign calls", resp, err, calls)
	}
	if b, err := s.Request(ctx, "s", 1); err != nil || string(b) != string(params) {
		t.Fatalf("Request after a retry: %q, %v; want %q", b, err, params)
	}

	// A failing signer leaves nothing behind.
	before := takeSnapshot(t, s)
	boom := errors.New("HSM unavailable")
	_, _, err = s.AppendRequest(ctx, ledger.Record{SessionID: "s", Entry: fx[2]}, []byte(`{"lost":1}`), requestKey("req-2"), func(ledger.Appended) ([]byte, error) { return nil, boom })
	if !errors.Is(err, boom) {
		t.Fatalf("failing signer: %v", err)
	}
	assertUnchanged(t, s, before)
	if _, err := s.Response(ctx, "s", 2); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("response stored by a failed AppendRequest: %v", err)
	}
	if _, err := s.Request(ctx, "s", 2); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("params stored by a failed AppendRequest: %v", err)
	}

	// A step already chained, even with other content, is refused before
	// signing.
	_, _, err = s.AppendRequest(ctx, ledger.Record{SessionID: "s", Entry: Synthetic(0, "")}, nil, requestKey("req-4"), sign)
	if err != nil {
		t.Fatal(err)
	}
	calls = 0
	_, _, err = s.AppendRequest(ctx, ledger.Record{SessionID: "s", Entry: Synthetic(0, "changed")}, []byte(`{"conflict":1}`), requestKey("req-3"), sign)
	if !errors.Is(err, ledger.ErrReplay) || calls != 0 {
		t.Fatalf("changed step: %v after %d sign calls", err, calls)
	}
	if _, err := s.Request(ctx, "s", 2); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("params stored by a refused AppendRequest (or by one given none): %v", err)
	}
	verifyChain(t, s, "s")
}

func testRecordRequest(t *testing.T, s Roles, clock *Clock) {
	ctx := context.Background()
	at := clock.Now()
	for _, tc := range []struct {
		session, request, nonce string
		replay                  bool
	}{
		{"s", "req-1", "n-1", false},
		{"s", "req-1", "n-2", true},   // request_id seen
		{"s", "req-2", "n-1", true},   // nonce seen
		{"s", "req-3", "", false},     // no nonce
		{"s", "req-4", "", false},     // an empty nonce is not a repeat
		{"s2", "req-1", "n-1", false}, // per session
		{"s", "req-2", "n-3", false},  // req-2 was refused above, so unseen
	} {
		err := s.RecordRequest(ctx, tc.session, tc.request, tc.nonce, at)
		if tc.replay != errors.Is(err, ledger.ErrReplay) || (!tc.replay && err != nil) {
			t.Errorf("RecordRequest(%s, %s, %q): %v, want replay=%v", tc.session, tc.request, tc.nonce, err, tc.replay)
		}
	}
	if err := s.RecordRequest(ctx, "s", "", "", at); err == nil || errors.Is(err, ledger.ErrReplay) || !strings.Contains(err.Error(), "request id") {
		t.Errorf("empty request id: %v", err)
	}
}

func testPolicyBundles(t *testing.T, s Roles, clock *Clock) {
	ctx := context.Background()
	bundle := func(id, version, content string) ledger.PolicyBundle {
		d := sha256.Sum256([]byte(content))
		return ledger.PolicyBundle{ID: id, Version: version, Digest: hex.EncodeToString(d[:]), Content: []byte(content)}
	}
	a1, a2, b1 := bundle("tools", "1", `{"rego":"package a"}`), bundle("tools", "2", `{"rego":"package a2"}`), bundle("mcp", "1", "tar")
	t0 := clock.Now()
	for _, b := range []ledger.PolicyBundle{a1, a2, b1} {
		if err := s.PutPolicyBundle(ctx, b); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Minute)
	}
	if err := s.PutPolicyBundle(ctx, a1); err != nil {
		t.Fatalf("identical bundle again: %v", err)
	}
	if err := s.PutPolicyBundle(ctx, bundle("tools", "1", "other")); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("same version, other content: %v", err)
	}
	bad := a1
	bad.Version, bad.Digest = "9", strings.Repeat("0", 64)
	if err := s.PutPolicyBundle(ctx, bad); err == nil || !strings.Contains(err.Error(), "digest") {
		t.Fatalf("wrong digest: %v", err)
	}
	got, err := s.PolicyBundle(ctx, "tools", "2")
	if err != nil || got.Digest != a2.Digest || string(got.Content) != string(a2.Content) || !got.RecordedAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("PolicyBundle: %+v, %v", got, err)
	}
	if _, err := s.PolicyBundle(ctx, "tools", "9"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("unknown bundle: %v", err)
	}
	all, err := s.PolicyBundles(ctx)
	if err != nil || len(all) != 3 {
		t.Fatalf("PolicyBundles: %+v, %v", all, err)
	}
	for i, want := range []ledger.PolicyBundle{a1, a2, b1} {
		if all[i].ID != want.ID || all[i].Version != want.Version || all[i].Digest != want.Digest || all[i].Content != nil {
			t.Errorf("bundle %d: %+v, want %s@%s without content", i, all[i], want.ID, want.Version)
		}
	}
}

// testAppendRequestSignedConcurrent signs many appends to one session at once (so
// stores that share commits sign inside one transaction), one signer
// failing: the others are stored, each beside the response its signer built
// for the entry's final position and hash.
func testAppendRequestSignedConcurrent(t *testing.T, s Roles, _ *Clock) {
	ctx := context.Background()
	const n, failing = 20, 7
	boom := errors.New("signer down")
	errs := make([]error, n)
	got := make([]ledger.Appended, n)
	resps := make([][]byte, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			got[i], resps[i], errs[i] = s.AppendRequest(ctx, ledger.Record{SessionID: "s", Entry: Synthetic(i, "")}, fmt.Appendf(nil, `{"i":%d}`, i), requestKey(fmt.Sprintf("r-%d", i)),
				func(a ledger.Appended) ([]byte, error) {
					if i == failing {
						return nil, boom
					}
					return fmt.Appendf(nil, "%d %s", a.Position, a.EntryHash), nil
				})
		})
	}
	wg.Wait()
	if !errors.Is(errs[failing], boom) {
		t.Fatalf("failing signer: %v", errs[failing])
	}
	es := verifyChain(t, s, "s")
	if len(es) != n-1 {
		t.Fatalf("%d entries stored, want %d", len(es), n-1)
	}
	for i := range n {
		if i == failing {
			continue
		}
		if errs[i] != nil {
			t.Fatalf("append %d: %v", i, errs[i])
		}
		e := es[got[i].Position]
		want := fmt.Sprintf("%d %s", e.Position, e.EntryHash)
		if e.EntryHash != got[i].EntryHash || string(resps[i]) != want {
			t.Fatalf("append %d: result %+v and response %q, stored entry %d %s", i, got[i], resps[i], e.Position, e.EntryHash)
		}
		if b, err := s.Response(ctx, "s", e.Position); err != nil || string(b) != want {
			t.Fatalf("stored response at %d: %q, %v; want %q", e.Position, b, err, want)
		}
		if b, err := s.Request(ctx, "s", e.Position); err != nil || string(b) != fmt.Sprintf(`{"i":%d}`, i) {
			t.Fatalf("stored params at %d: %q, %v; want those of append %d", e.Position, b, err, i)
		}
	}
}

// testAppendRequest: the replay key is recorded with the entry, shares the
// history RecordRequest writes, and a replay writes nothing.
func testAppendRequest(t *testing.T, s Roles, clock *Clock) {
	ctx := context.Background()
	at := clock.Now()
	calls := 0
	sign := func(a ledger.Appended) ([]byte, error) {
		calls++
		return fmt.Appendf(nil, "%d %s", a.Position, a.EntryHash), nil
	}
	seen := func(req, nonce string) ledger.Seen { return ledger.Seen{RequestID: req, Nonce: nonce, At: at} }
	got, resp, err := s.AppendRequest(ctx, ledger.Record{SessionID: "s", AgentID: "a", Entry: Synthetic(0, "")}, []byte(`{"p":0}`), seen("step-0", "nonce-0000000000000"), sign)
	if err != nil {
		t.Fatal(err)
	}
	if got.Position != 0 || string(resp) != fmt.Sprintf("0 %s", got.EntryHash) {
		t.Fatalf("first append: %+v, response %q", got, resp)
	}
	if b, err := s.Request(ctx, "s", 0); err != nil || string(b) != `{"p":0}` {
		t.Fatalf("stored params: %q, %v", b, err)
	}
	// The key is in the same history RecordRequest uses, both ways.
	if err := s.RecordRequest(ctx, "s", "step-0", "", at); !errors.Is(err, ledger.ErrReplay) {
		t.Fatalf("RecordRequest after AppendRequest with the same request_id: %v", err)
	}
	if err := s.RecordRequest(ctx, "s", "other", "nonce-0000000000000", at); !errors.Is(err, ledger.ErrReplay) {
		t.Fatalf("RecordRequest after AppendRequest with the same nonce: %v", err)
	}
	if err := s.RecordRequest(ctx, "s", "recorded", "", at); err != nil {
		t.Fatal(err)
	}
	before := takeSnapshot(t, s)
	calls = 0
	for _, tc := range []struct {
		name  string
		entry []byte
		seen  ledger.Seen
	}{
		{"request_id seen with an entry", Synthetic(1, ""), seen("step-0", "")},
		{"nonce seen with an entry", Synthetic(1, ""), seen("step-1", "nonce-0000000000000")},
		{"request_id seen by RecordRequest", Synthetic(1, ""), seen("recorded", "")},
		{"step already chained (a retry is a replay here)", Synthetic(0, ""), seen("fresh", "")},
	} {
		_, resp, err := s.AppendRequest(ctx, ledger.Record{SessionID: "s", Entry: tc.entry}, []byte(`{"lost":1}`), tc.seen, sign)
		if !errors.Is(err, ledger.ErrReplay) || resp != nil {
			t.Errorf("%s: %v, response %q; want ErrReplay and none", tc.name, err, resp)
		}
		if err != nil && !strings.Contains(err.Error(), tc.seen.RequestID) {
			t.Errorf("%s: error %q does not name request %q", tc.name, err, tc.seen.RequestID)
		}
	}
	if calls != 0 {
		t.Errorf("the signer ran %d times for replays", calls)
	}
	assertUnchanged(t, s, before)
	if _, err := s.Request(ctx, "s", 1); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("params stored by a replay: %v", err)
	}
	got, _, err = s.AppendRequest(ctx, ledger.Record{SessionID: "s", Entry: Synthetic(1, "")}, nil, seen("step-1", "nonce-1111111111111"), sign)
	if err != nil || got.Position != 1 {
		t.Fatalf("next request: %+v, %v", got, err)
	}
	// Keys are per session.
	if _, _, err := s.AppendRequest(ctx, ledger.Record{SessionID: "s2", Entry: Synthetic(0, "")}, nil, seen("step-0", "nonce-0000000000000"), sign); err != nil {
		t.Fatalf("same keys in another session: %v", err)
	}
	if _, _, err := s.AppendRequest(ctx, ledger.Record{SessionID: "s", Entry: Synthetic(2, "")}, nil, seen("", ""), sign); err == nil || errors.Is(err, ledger.ErrReplay) || !strings.Contains(err.Error(), "request id") {
		t.Errorf("empty request id: %v", err)
	}
	verifyChain(t, s, "s")
}

// testAppendRequestConcurrent: appends racing with one request_id (and,
// separately, one nonce) in a session, as stores that share commits put
// them in one transaction: exactly one is chained, the others are replays.
func testAppendRequestConcurrent(t *testing.T, s Roles, clock *Clock) {
	ctx := context.Background()
	const n = 8
	for _, tc := range []struct {
		name string
		seen func(i int) ledger.Seen
	}{
		{"request_id", func(i int) ledger.Seen { return ledger.Seen{RequestID: "dup", At: clock.Now()} }},
		{"nonce", func(i int) ledger.Seen {
			return ledger.Seen{RequestID: fmt.Sprintf("r-%d", i), Nonce: "shared-nonce-00000", At: clock.Now()}
		}},
	} {
		session := "s-" + tc.name
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				_, _, errs[i] = s.AppendRequest(ctx, ledger.Record{SessionID: session, Entry: Synthetic(i, "")}, fmt.Appendf(nil, `{"i":%d}`, i), tc.seen(i),
					func(a ledger.Appended) ([]byte, error) { return fmt.Appendf(nil, "%d", a.Position), nil })
			})
		}
		wg.Wait()
		won := -1
		for i, err := range errs {
			switch {
			case err == nil && won >= 0:
				t.Errorf("%s: appends %d and %d both succeeded", tc.name, won, i)
			case err == nil:
				won = i
			case !errors.Is(err, ledger.ErrReplay):
				t.Errorf("%s: append %d: %v, want ErrReplay", tc.name, i, err)
			}
		}
		if won < 0 {
			t.Fatalf("%s: no append succeeded: %v", tc.name, errs)
		}
		es := verifyChain(t, s, session)
		if len(es) != 1 || es[0].StepID != fmt.Sprintf("step-%d", won) {
			t.Fatalf("%s: stored %d entries (%+v), want only step-%d", tc.name, len(es), es, won)
		}
		if b, err := s.Request(ctx, session, 0); err != nil || string(b) != fmt.Sprintf(`{"i":%d}`, won) {
			t.Fatalf("%s: stored params %q, %v", tc.name, b, err)
		}
	}
}

// searcher is the compliance search both stores serve (migration 0010).
type searcher interface {
	SearchEntries(ctx context.Context, f ledger.SearchFilter) (ledger.SearchPage, error)
}

// testSearchToolOfSealedParams: params are sealed at rest, yet the search
// finds a step by the tool its params name (the store keeps the name in
// clear beside them), and the name is not read out of the ciphertext.
func testSearchToolOfSealedParams(t *testing.T, s Roles, clock *Clock) {
	ctx := context.Background()
	ss, ok := s.Store.(searcher)
	if !ok {
		t.Fatalf("%T has no compliance search", s.Store)
	}
	sign := func(a ledger.Appended) ([]byte, error) { return []byte(`{}`), nil }
	params := []byte(`{"payload":{"tool":{"name":"read_file"},"arguments":{"path":"/etc/passwd"}}}`)
	if _, _, err := s.AppendRequest(ctx, ledger.Record{SessionID: "tool", AgentID: "a", Entry: Synthetic(0, "")}, params, requestKey("tool-0"), sign); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.AppendRequest(ctx, ledger.Record{SessionID: "tool", AgentID: "a", Entry: Synthetic(1, "")}, []byte(`{"payload":{}}`), requestKey("tool-1"), sign); err != nil {
		t.Fatal(err)
	}
	page, err := ss.SearchEntries(ctx, ledger.SearchFilter{ToolName: "read_file"})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Hits) != 1 || page.Hits[0].SessionID != "tool" || page.Hits[0].Position != 0 || page.Hits[0].ToolName != "read_file" {
		t.Fatalf("search by tool: %+v", page.Hits)
	}
	if b, err := s.Request(ctx, "tool", 0); err != nil || string(b) != string(params) {
		t.Fatalf("stored params read back: %q, %v", b, err)
	}
}

// testEraseParams: an erasure deletes one step's params and records why
// and when, is refused a second time and where nothing is stored, writes
// nothing when refused, and leaves every entry, response and the chain
// byte for byte as they were.
func testEraseParams(t *testing.T, s Roles, clock *Clock) {
	ctx := context.Background()
	sign := func(a ledger.Appended) ([]byte, error) {
		return fmt.Appendf(nil, `{"result":{"chain_hash":%q,"position":%d}}`, a.EntryHash, a.Position), nil
	}
	params := func(i int) []byte { return fmt.Appendf(nil, `{"payload":{"text":"secret %d"}}`, i) }
	fx := Fixtures(t)
	for i := range 3 {
		if _, _, err := s.AppendRequest(ctx, ledger.Record{SessionID: "s", AgentID: "a", Entry: fx[i]}, params(i), requestKey(fmt.Sprintf("r-%d", i)), sign); err != nil {
			t.Fatal(err)
		}
	}
	// Position 3 has a response but no params; "other" is another session.
	if _, _, err := s.AppendRequest(ctx, ledger.Record{SessionID: "s", Entry: fx[3]}, nil, requestKey("r-3"), sign); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.AppendRequest(ctx, ledger.Record{SessionID: "other", AgentID: "a", Entry: fx[0]}, params(0), requestKey("r-0"), sign); err != nil {
		t.Fatal(err)
	}
	before := takeSnapshot(t, s)
	responses := func() [][]byte {
		t.Helper()
		var rs [][]byte
		for pos := range int64(4) {
			b, err := s.Response(ctx, "s", pos)
			if err != nil {
				t.Fatalf("response at %d: %v", pos, err)
			}
			rs = append(rs, b)
		}
		return rs
	}
	respBefore := responses()
	chainBefore := verifyChain(t, s, "s")

	clock.Advance(time.Hour)
	const reason, by = "data subject request #42 (GDPR Art. 17)", "dpo@example.org"
	e, err := s.EraseParams(ctx, "s", 1, reason, by)
	if err != nil {
		t.Fatal(err)
	}
	first := ledger.Erasure{SessionID: "s", Position: 1, ErasedAt: clock.Now(), Reason: reason, ErasedBy: by}
	if !e.ErasedAt.Equal(first.ErasedAt) || e.ErasedAt.Location() != time.UTC || e.SessionID != "s" || e.Position != 1 || e.Reason != reason || e.ErasedBy != by {
		t.Fatalf("EraseParams returned %+v, want %+v", e, first)
	}
	wantErased := func(pos int64, want ledger.Erasure) {
		t.Helper()
		b, err := s.Request(ctx, "s", pos)
		var ee *ledger.ErasedError
		if !errors.As(err, &ee) || !errors.Is(err, ledger.ErrErased) || errors.Is(err, ledger.ErrNotFound) || b != nil {
			t.Fatalf("Request of erased params at %d: %q, %v; want an *ErasedError only", pos, b, err)
		}
		got := ee.Erasure
		if got.SessionID != want.SessionID || got.Position != want.Position || !got.ErasedAt.Equal(want.ErasedAt) ||
			got.ErasedAt.Location() != time.UTC || got.Reason != want.Reason || got.ErasedBy != want.ErasedBy {
			t.Fatalf("erasure read back: %+v, want %+v", got, want)
		}
		for _, part := range []string{want.Reason, want.ErasedAt.Format(time.RFC3339Nano), "erased"} {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("error %q does not say %q", err, part)
			}
		}
	}
	wantErased(1, first)
	wantParams := func(session string, pos int64, i int) {
		t.Helper()
		if b, err := s.Request(ctx, session, pos); err != nil || string(b) != string(params(i)) {
			t.Fatalf("params of %s at %d: %q, %v; want %q", session, pos, b, err, params(i))
		}
	}
	wantParams("s", 0, 0)
	wantParams("s", 2, 2)
	wantParams("other", 0, 0)

	// A second erasure is refused, names the first and changes nothing.
	clock.Advance(time.Hour)
	_, err = s.EraseParams(ctx, "s", 1, "again", "someone else")
	var ee *ledger.ErasedError
	if !errors.As(err, &ee) || !ee.Erasure.ErasedAt.Equal(first.ErasedAt) || ee.Erasure.Reason != reason || !strings.Contains(err.Error(), reason) {
		t.Fatalf("second erasure: %v; want an *ErasedError naming the first", err)
	}
	wantErased(1, first)

	// No params: never stored (position 3), past the end, another
	// session, an unknown session. Nothing is recorded for them.
	for _, c := range []struct {
		session string
		pos     int64
	}{{"s", 3}, {"s", 4}, {"other", 1}, {"none", 0}} {
		_, err := s.EraseParams(ctx, c.session, c.pos, reason, by)
		if !errors.Is(err, ledger.ErrNotFound) || errors.Is(err, ledger.ErrErased) {
			t.Errorf("erase %s at %d (no params): %v, want ErrNotFound", c.session, c.pos, err)
		}
		if _, err := s.Request(ctx, c.session, c.pos); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("params of %s at %d after a refused erasure: %v, want ErrNotFound (no erasure recorded)", c.session, c.pos, err)
		}
	}

	// Malformed requests are refused before anything is written.
	for _, c := range []struct {
		name, session string
		pos           int64
		reason, by    string
		want          string
	}{
		{"empty reason", "s", 2, "", by, "reason must not be blank"},
		{"blank reason", "s", 2, " \t\n", by, "reason must not be blank"},
		{"negative position", "s", -1, reason, by, "negative position"},
		{"empty session", "", 0, reason, by, "empty session id"},
		{"reason not UTF-8", "s", 2, "bad \xff", by, "reason is not valid UTF-8"},
		{"erased_by not UTF-8", "s", 2, reason, "\xfe", "erased_by is not valid UTF-8"},
		{"reason too long", "s", 2, strings.Repeat("x", ledger.MaxErasureText+1), by, "more than 4096"},
	} {
		_, err := s.EraseParams(ctx, c.session, c.pos, c.reason, c.by)
		if err == nil || !strings.Contains(err.Error(), c.want) || errors.Is(err, ledger.ErrNotFound) || errors.Is(err, ledger.ErrErased) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
	wantParams("s", 2, 2)

	// A retry of the erased step's append is a replay and does not bring
	// its params back.
	if _, _, err := s.AppendRequest(ctx, ledger.Record{SessionID: "s", Entry: fx[1]}, params(1), requestKey("r-1-retry"), sign); !errors.Is(err, ledger.ErrReplay) {
		t.Fatalf("retry of the erased step: %v, want ErrReplay", err)
	}
	wantErased(1, first)

	// Erasing with no by is allowed; the two erasures are independent.
	e2, err := s.EraseParams(ctx, "s", 0, "retention period over", "")
	if err != nil || e2.ErasedBy != "" || !e2.ErasedAt.Equal(clock.Now()) {
		t.Fatalf("erase without by: %+v, %v", e2, err)
	}
	wantErased(0, ledger.Erasure{SessionID: "s", Position: 0, ErasedAt: clock.Now(), Reason: "retention period over"})
	wantErased(1, first)
	wantParams("other", 0, 0)

	// The point: entries, responses and the chain are byte for byte what
	// they were.
	assertUnchanged(t, s, before)
	chainAfter := verifyChain(t, s, "s")
	for i := range chainBefore {
		b, a := chainBefore[i], chainAfter[i]
		if string(b.Content) != string(a.Content) || b.EntryHash != a.EntryHash || !sameHash(b.PreviousHash, a.PreviousHash) {
			t.Fatalf("entry %d changed by the erasure", i)
		}
	}
	for i, r := range responses() {
		if string(r) != string(respBefore[i]) {
			t.Fatalf("response %d changed by the erasure: %q became %q", i, respBefore[i], r)
		}
	}
}

// testEraseParamsConcurrent: of concurrent erasures of the same params one
// wins; the others are told it was erased and record nothing.
func testEraseParamsConcurrent(t *testing.T, s Roles, _ *Clock) {
	ctx := context.Background()
	if _, _, err := s.AppendRequest(ctx, ledger.Record{SessionID: "s", AgentID: "a", Entry: Synthetic(0, "")}, []byte(`{"p":0}`), requestKey("r-0"),
		func(ledger.Appended) ([]byte, error) { return []byte("{}"), nil }); err != nil {
		t.Fatal(err)
	}
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, errs[i] = s.EraseParams(ctx, "s", 0, fmt.Sprintf("erasure %d", i), "") })
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won == -1:
			won = i
		case err == nil:
			t.Fatalf("erasures %d and %d both succeeded", won, i)
		case !errors.Is(err, ledger.ErrErased):
			t.Fatalf("erasure %d: %v, want ErrErased", i, err)
		}
	}
	if won == -1 {
		t.Fatal("no erasure succeeded")
	}
	var ee *ledger.ErasedError
	if _, err := s.Request(ctx, "s", 0); !errors.As(err, &ee) || ee.Erasure.Reason != fmt.Sprintf("erasure %d", won) {
		t.Fatalf("Request after the race: %v; want the erasure of %d", err, won)
	}
}
