package storetest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/ledger"
)

// OpenIngest opens an empty store with ingest support.
type OpenIngest func(t *testing.T) ledger.IngestStore

// RunIngest runs the ledger.IngestStore conformance suite.
func RunIngest(t *testing.T, open OpenIngest) {
	t.Run("AcceptDuplicateQuarantine", func(t *testing.T) { testIngestOutcomes(t, open) })
	t.Run("ChainMismatchDoesNotBlock", func(t *testing.T) { testIngestChainMismatch(t, open) })
	t.Run("ReplayKey", func(t *testing.T) { testIngestReplayKey(t, open) })
	t.Run("Flags", func(t *testing.T) { testIngestFlags(t, open) })
	t.Run("Concurrent", func(t *testing.T) { testIngestConcurrent(t, open) })
}

// IngestRecordFor returns an accepted-to-be record with a synthetic entry.
func IngestRecordFor(source, key, session string, n int64) ledger.IngestRecord {
	raw := fmt.Appendf(nil, `{"key":%q,"n":%d}`, key, n)
	entry := fmt.Appendf(nil, `{"entry_id":"e-%s","step_id":"s-%s","step_type":"ingest/test","source_record":%q}`, key, key, raw)
	return ledger.IngestRecord{
		Source: source, Key: key, Digest: sha256.Sum256(raw), File: "f.jsonl", Record: n, Raw: raw,
		Entry: ledger.Record{SessionID: session, Entry: entry},
	}
}

func statuses(rs []ledger.IngestResult) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r.Status) + ":" + r.Reason
	}
	return out
}

// ingestWant ingests rs into s and fails t, naming what, unless the
// results' statuses (status:reason) are want.
func ingestWant(t *testing.T, s ledger.IngestStore, what string, rs []ledger.IngestRecord, want ...string) []ledger.IngestResult {
	t.Helper()
	res, err := s.Ingest(context.Background(), rs)
	if err != nil {
		t.Fatal(err)
	}
	if got := statuses(res); !slices.Equal(got, want) {
		t.Fatalf("%s %v, want %v", what, got, want)
	}
	return res
}

func testIngestOutcomes(t *testing.T, open OpenIngest) {
	ctx := context.Background()
	s := open(t)
	bad := ledger.IngestRecord{Source: "opa", File: "f.jsonl", Record: 2, Raw: []byte(`{"broken`),
		Quarantine: &ledger.Quarantine{Reason: "malformed_json", Detail: "f.jsonl:2: unexpected end"}}
	again := IngestRecordFor("opa", "a", "s1", 1)
	again.Record = 4 // the same record again in the batch
	batch := []ledger.IngestRecord{
		IngestRecordFor("opa", "a", "s1", 1),
		bad,
		IngestRecordFor("opa", "b", "s1", 3),
		again,
	}
	res := ingestWant(t, s, "statuses", batch, "accepted:", "quarantined:malformed_json", "accepted:", "duplicate:")
	if res[0].Position != 0 || res[2].Position != 1 || res[3].Position != 0 || res[3].EntryHash != res[0].EntryHash {
		t.Fatalf("positions: %+v", res)
	}
	es := verifyChain(t, s, "s1")
	if len(es) != 2 {
		t.Fatalf("session holds %d entries, want 2", len(es))
	}

	// Re-running the batch, as a restarted ingest does: nothing new.
	res2 := ingestWant(t, s, "re-run statuses", batch, "duplicate:", "quarantined:malformed_json", "duplicate:", "duplicate:")
	if res2[2].SessionID != "s1" || res2[2].Position != 1 || res2[2].EntryHash != res[2].EntryHash {
		t.Fatalf("duplicate does not name the stored entry: %+v", res2[2])
	}
	if sess, err := s.Session(ctx, "s1"); err != nil || sess.Length != 2 {
		t.Fatalf("session after re-run: %+v, %v", sess, err)
	}
	qs, err := s.Quarantined(ctx, ledger.IngestFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 1 || qs[0].Reason != "malformed_json" || string(qs[0].Raw) != `{"broken` || qs[0].File != "f.jsonl" || qs[0].Record != 2 || qs[0].Detail != bad.Quarantine.Detail {
		t.Fatalf("quarantine: %+v", qs)
	}

	// The same key with other content is no retry.
	other := IngestRecordFor("opa", "a", "s1", 99)
	res3, err := s.Ingest(ctx, []ledger.IngestRecord{other})
	if err != nil {
		t.Fatal(err)
	}
	if res3[0].Status != ledger.IngestQuarantined || res3[0].Reason != ledger.ReasonKeyConflict {
		t.Fatalf("conflicting key: %+v", res3[0])
	}
	got, err := s.IngestedByKey(ctx, "opa", "b")
	if err != nil || got.Position != 1 || got.SessionID != "s1" {
		t.Fatalf("IngestedByKey: %+v, %v", got, err)
	}
	if _, err := s.IngestedByKey(ctx, "opa", "zzz"); err == nil {
		t.Fatal("IngestedByKey of an unknown key succeeded")
	}
	// A key is per source.
	res4, err := s.Ingest(ctx, []ledger.IngestRecord{IngestRecordFor("bash-guard", "a", "s2", 1)})
	if err != nil || res4[0].Status != ledger.IngestAccepted {
		t.Fatalf("same key, other source: %+v, %v", res4, err)
	}
}

func testIngestChainMismatch(t *testing.T, open OpenIngest) {
	ctx := context.Background()
	s := open(t)
	r1 := IngestRecordFor("acs", "1", "s", 1)
	e1, err := acs.ParseEntry(r1.Entry.Entry)
	if err != nil {
		t.Fatal(err)
	}
	h1 := acs.EntryHash(e1.Content, nil)
	r1.Head, r1.Response = &h1, []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)
	wrong := acs.Hash{1}
	r2 := IngestRecordFor("acs", "2", "s", 2)
	r2.Head, r2.Response = &wrong, []byte(`{"x":2}`)
	r3 := IngestRecordFor("acs", "3", "s", 3)
	res := ingestWant(t, s, "statuses", []ledger.IngestRecord{r1, r2, r3}, "accepted:", "quarantined:chain_mismatch", "accepted:")
	if res[2].Position != 1 {
		t.Fatalf("the record after a mismatch is at %d, want 1", res[2].Position)
	}
	// Again: the stored ones are duplicates (their heads are not the
	// session's new head, which must not make them mismatches).
	ingestWant(t, s, "re-run statuses", []ledger.IngestRecord{r1, r2, r3}, "duplicate:", "quarantined:chain_mismatch", "duplicate:")
	verifyChain(t, s, "s")
	if gs, ok := s.(ledger.StepReader); ok {
		b, err := gs.Response(ctx, "s", 0)
		if err != nil || string(b) != string(r1.Response) {
			t.Fatalf("response beside entry 0: %q, %v", b, err)
		}
	}
	qs, err := s.Quarantined(ctx, ledger.IngestFilter{Source: "acs"})
	if err != nil || len(qs) != 1 || qs[0].Key != "2" {
		t.Fatalf("quarantine: %+v, %v", qs, err)
	}
}

func testIngestReplayKey(t *testing.T, open OpenIngest) {
	s := open(t)
	a := IngestRecordFor("a2h", "k1", "s", 1)
	a.ReplayKey = "jti-1"
	b := IngestRecordFor("a2h", "k2", "s", 2)
	b.ReplayKey = "jti-1"
	ingestWant(t, s, "statuses", []ledger.IngestRecord{a, b}, "accepted:", "quarantined:replayed_jti")
	c := IngestRecordFor("a2h", "k3", "s", 3)
	c.ReplayKey = "jti-1"
	a.Record = 9 // the same record again, from elsewhere
	ingestWant(t, s, "statuses", []ledger.IngestRecord{c, a}, "quarantined:replayed_jti", "duplicate:")
}

func testIngestFlags(t *testing.T, open OpenIngest) {
	ctx := context.Background()
	s := open(t)
	var rs []ledger.IngestRecord
	for i := range 5 {
		r := IngestRecordFor("bash-guard", fmt.Sprint(i), "s", int64(i+1))
		if i%2 == 0 {
			r.Flags = []string{"fail_open"}
		}
		if i == 4 {
			r.Flags = append(r.Flags, "fail_open_keyless")
		}
		rs = append(rs, r)
	}
	if _, err := s.Ingest(ctx, rs); err != nil {
		t.Fatal(err)
	}
	got, err := s.Flagged(ctx, "fail_open", ledger.IngestFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, r := range got {
		keys = append(keys, r.Key)
	}
	if !slices.Equal(keys, []string{"0", "2", "4"}) {
		t.Fatalf("flagged fail_open: %v", keys)
	}
	if !slices.Equal(got[2].Flags, []string{"fail_open", "fail_open_keyless"}) || got[1].Position != 2 {
		t.Fatalf("flagged record: %+v", got[2])
	}
	page, err := s.Flagged(ctx, "fail_open", ledger.IngestFilter{After: got[0].Seq, Limit: 1})
	if err != nil || len(page) != 1 || page[0].Key != "2" {
		t.Fatalf("second page: %+v, %v", page, err)
	}
	if none, err := s.Flagged(ctx, "unlock_bypass", ledger.IngestFilter{}); err != nil || len(none) != 0 {
		t.Fatalf("unlock_bypass: %+v, %v", none, err)
	}
}

// testIngestConcurrent runs ingesters over overlapping keys at once: every
// key is appended exactly once, and each chain verifies.
func testIngestConcurrent(t *testing.T, open OpenIngest) {
	ctx := context.Background()
	s := open(t)
	const workers, keys = 4, 60
	var wg sync.WaitGroup
	results := make([][]ledger.IngestResult, workers)
	errs := make([]error, workers)
	for w := range workers {
		wg.Go(func() {
			for start := 0; start < keys; start += 10 {
				var batch []ledger.IngestRecord
				for k := start; k < start+10; k++ {
					batch = append(batch, IngestRecordFor("opa", fmt.Sprint(k), fmt.Sprintf("s%d", k%3), int64(k+1)))
				}
				res, err := s.Ingest(ctx, batch)
				if err != nil {
					errs[w] = err
					return
				}
				results[w] = append(results[w], res...)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	accepted := make(map[string]int)
	for _, rs := range results {
		for _, r := range rs {
			switch r.Status {
			case ledger.IngestAccepted:
				accepted[r.Key]++
			case ledger.IngestDuplicate:
			default:
				t.Fatalf("unexpected result %+v", r)
			}
		}
	}
	if len(accepted) != keys {
		t.Fatalf("%d keys accepted, want %d", len(accepted), keys)
	}
	for k, n := range accepted {
		if n != 1 {
			t.Fatalf("key %s accepted %d times", k, n)
		}
	}
	total := 0
	for i := range 3 {
		total += len(verifyChain(t, s, fmt.Sprintf("s%d", i)))
	}
	if total != keys {
		t.Fatalf("%d entries stored, want %d", total, keys)
	}
}
