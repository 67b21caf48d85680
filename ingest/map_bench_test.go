package ingest_test

import (
	"context"
	"testing"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/ingest"
)

// BenchmarkMapOPA measures mapping one OPA event (strict parse, checks,
// the entry's JSON) and the ledger's parse of that entry.
func BenchmarkMapOPA(b *testing.B) {
	raw := ingest.Raw{File: "bench", Record: 1, Bytes: benchEvent("m", 1)}
	var m ingest.OPAMapper
	b.Run("map", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if r := m.Map(context.Background(), raw); r.Quarantine != nil {
				b.Fatal(r.Quarantine)
			}
		}
	})
	entry := m.Map(context.Background(), raw).Entry.Entry
	b.Run("parse-entry", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := acs.ParseEntry(entry); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("canonicalize-event", func(b *testing.B) {
		for b.Loop() {
			acs.Canonicalize(raw.Bytes)
		}
	})
}
