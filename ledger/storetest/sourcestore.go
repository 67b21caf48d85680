package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/paramcrypt"
)

// SourceStore is what the source-record suite calls: ingest with the
// source kept beside, its reads and its erasure.
type SourceStore interface {
	ledger.Store
	Ingest(ctx context.Context, rs []ledger.IngestRecord) ([]ledger.IngestResult, error)
	ledger.SourceReader
	ledger.SourceEraser
	ledger.PayloadReader
}

// OpenSources opens an empty store with opts.
type OpenSources func(t *testing.T, opts ledger.Options) SourceStore

// SourceRecordFor is IngestRecordFor in the shape ingest writes today: the
// entry commits to the record by source_sha256 (with its format and
// key), and the record's bytes are kept beside it.
func SourceRecordFor(source, key, session string, n int64) ledger.IngestRecord {
	raw := fmt.Appendf(nil, `{"key":%q,"n":%d,"input":{"user":"alice@example.org"}}`, key, n)
	sum := sha256.Sum256(raw)
	entry := fmt.Appendf(nil, `{"entry_id":"e-%s","step_id":"s-%s","step_type":"ingest/test","source_format":%q,"source_key":%q,"source_sha256":%q}`,
		key, key, source, key, hex.EncodeToString(sum[:]))
	return ledger.IngestRecord{
		Source: source, Key: key, Digest: sum, File: "f.jsonl", Record: n, Raw: raw, KeepSource: true,
		Entry: ledger.Record{SessionID: session, Entry: entry},
	}
}

// RunSources runs the source-record suite: the bytes are kept beside the
// entry, sealed at rest (opts carry a paramcrypt sealer), read back
// exactly, and erased with a record of who, when and why while the chain
// stays byte for byte. exec runs a statement as the database's owner (or
// with nothing but the triggers in the way): deleting a source record
// without an erasure, or changing an erasure, must fail.
func RunSources(t *testing.T, open OpenSources, exec func(stmt string) error) {
	sealer, err := paramcrypt.New(TestMasterKey)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	clock := NewClock()
	s := open(t, ledger.Options{Now: clock.Now, Params: sealer})

	kept, old := SourceRecordFor("opa", "d-1", "s", 1), IngestRecordFor("opa", "d-0", "s", 0)
	ingest := func(what string, rs []ledger.IngestRecord, want ...string) []ledger.IngestResult {
		t.Helper()
		res, err := s.Ingest(ctx, rs)
		if err != nil {
			t.Fatal(err)
		}
		if got := statuses(res); !slices.Equal(got, want) {
			t.Fatalf("%s %v, want %v", what, got, want)
		}
		return res
	}
	res := ingest("first batch", []ledger.IngestRecord{old, kept, SourceRecordFor("opa", "d-2", "s", 2)}, "accepted:", "accepted:", "accepted:")
	// A redelivery is a duplicate and stores nothing more.
	ingest("redelivery", []ledger.IngestRecord{SourceRecordFor("opa", "d-1", "s", 1)}, "duplicate:")
	if res[1].Position != 1 {
		t.Fatalf("positions %+v", res)
	}

	got, err := s.Source(ctx, "s", 1)
	if err != nil || !bytes.Equal(got, kept.Raw) {
		t.Fatalf("Source: %q, %v; want %q", got, err, kept.Raw)
	}
	// Before 0015 the source was inline: nothing is stored beside it.
	if _, err := s.Source(ctx, "s", 0); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("Source of an entry with its source inline: %v, want ErrNotFound", err)
	}
	ps, through, err := s.Payloads(ctx, "s", 0, 3, false)
	if err != nil || through != 3 || len(ps) != 2 || ps[0].Position != 1 || ps[0].Kind != ledger.PayloadSource || !bytes.Equal(ps[0].Bytes, kept.Raw) || ps[1].Position != 2 {
		t.Fatalf("Payloads: %+v, %v", ps, err)
	}

	before := verifyChain(t, s, "s")
	clock.Advance(time.Hour)
	const reason, by = "data subject request #7 (GDPR Art. 17)", "dpo@example.org"
	e, err := s.EraseSource(ctx, "s", 1, reason, by)
	if err != nil {
		t.Fatal(err)
	}
	if e.SessionID != "s" || e.Position != 1 || e.Payload != ledger.PayloadSource || !e.ErasedAt.Equal(clock.Now()) || e.Reason != reason || e.ErasedBy != by {
		t.Fatalf("EraseSource returned %+v", e)
	}
	after := verifyChain(t, s, "s")
	for i := range before {
		if !bytes.Equal(before[i].Content, after[i].Content) || before[i].EntryHash != after[i].EntryHash {
			t.Fatalf("entry %d changed with the erasure of its source", i)
		}
	}
	_, err = s.Source(ctx, "s", 1)
	var ee *ledger.ErasedError
	if !errors.As(err, &ee) || errors.Is(err, ledger.ErrNotFound) || ee.Erasure.Reason != reason || ee.Erasure.ErasedBy != by || !ee.Erasure.ErasedAt.Equal(clock.Now()) || ee.Erasure.Payload != ledger.PayloadSource {
		t.Fatalf("Source after erasure: %v", err)
	}
	if !strings.Contains(err.Error(), "source record") {
		t.Errorf("the erasure error does not say what was erased: %v", err)
	}
	ps, _, err = s.Payloads(ctx, "s", 0, 3, false)
	if err != nil || len(ps) != 2 || ps[0].Erasure == nil || ps[0].Erasure.Reason != reason || ps[0].Erasure.ErasedBy != by || ps[0].Erasure.Payload != ledger.PayloadSource || ps[0].Bytes != nil {
		t.Fatalf("Payloads after erasure: %+v, %v", ps, err)
	}

	// Refused, and nothing written: a second erasure, an entry without a
	// source, an unknown entry, bad reasons.
	if _, err := s.EraseSource(ctx, "s", 1, "again", ""); !errors.As(err, &ee) || ee.Erasure.Reason != reason {
		t.Errorf("second EraseSource: %v, want the first erasure", err)
	}
	if _, err := s.EraseSource(ctx, "s", 0, "inline", ""); !errors.Is(err, ledger.ErrNotFound) || !strings.Contains(err.Error(), "no source record") {
		t.Errorf("EraseSource of an entry with its source inline: %v", err)
	}
	for _, tc := range []struct {
		session string
		pos     int64
	}{{"s", 9}, {"nobody", 0}} {
		_, err := s.EraseSource(ctx, tc.session, tc.pos, "reason", "")
		if !errors.Is(err, ledger.ErrNotFound) || !strings.Contains(err.Error(), fmt.Sprintf("session %q position %d", tc.session, tc.pos)) || !strings.Contains(err.Error(), "no entry") {
			t.Errorf("EraseSource of unknown %s/%d: %v, want ErrNotFound naming it", tc.session, tc.pos, err)
		}
	}
	for _, bad := range []string{"", "  ", "a\xffb", strings.Repeat("r", ledger.MaxErasureText+1)} {
		if _, err := s.EraseSource(ctx, "s", 2, bad, ""); err == nil || errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("EraseSource with reason %.20q: %v, want refused", bad, err)
		}
	}
	if got, err := s.Source(ctx, "s", 2); err != nil || len(got) == 0 {
		t.Fatalf("a refused erasure touched position 2: %v", err)
	}

	// A read of payloads stops past ledger.PayloadReadBudget bytes, at a
	// position boundary, and says where.
	var big []ledger.IngestRecord
	for i := range 3 {
		r := SourceRecordFor("opa", fmt.Sprintf("big-%d", i), "big", int64(i))
		r.Raw = bytes.Repeat([]byte{'a' + byte(i)}, ledger.PayloadReadBudget*5/8)
		sum := sha256.Sum256(r.Raw)
		r.Digest = sum
		big = append(big, r)
	}
	ingest("big records", big, "accepted:", "accepted:", "accepted:")
	ps, through, err = s.Payloads(ctx, "big", 0, 10, false)
	if err != nil || through != 2 || len(ps) != 2 || !bytes.Equal(ps[1].Bytes, big[1].Raw) {
		t.Fatalf("Payloads over the budget: %d payloads through %d, %v; want 2 through 2", len(ps), through, err)
	}
	if ps, through, err = s.Payloads(ctx, "big", through, 10, false); err != nil || through != 10 || len(ps) != 1 || !bytes.Equal(ps[0].Bytes, big[2].Raw) {
		t.Fatalf("Payloads after the budget's stop: %d payloads through %d, %v", len(ps), through, err)
	}

	// The database itself refuses what EraseSource does not do.
	for _, stmt := range []string{
		`DELETE FROM source_records WHERE session_id = 's' AND position = 2`,
		`UPDATE source_records SET record = source_sha256 WHERE session_id = 's'`,
		`DELETE FROM source_erasures`,
		`UPDATE source_erasures SET reason = 'nothing to see'`,
	} {
		if err := exec(stmt); err == nil {
			t.Errorf("%s: allowed", stmt)
		}
	}
	if got, err := s.Source(ctx, "s", 2); err != nil || len(got) == 0 {
		t.Fatalf("source at position 2 after refused statements: %v", err)
	}
}
