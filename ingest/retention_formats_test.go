package ingest

import (
	"slices"
	"testing"

	"github.com/acsledger/acsledger/ledger"
)

// TestRetentionKnowsFormats: every format whose records keep their source
// beside the entry is a format a retention rule may name for the source
// payload kind (ledger.PayloadKinds lists them without importing ingest).
func TestRetentionKnowsFormats(t *testing.T) {
	var source []string
	for _, k := range ledger.PayloadKinds {
		if k.Name == "source" {
			source = k.Formats
		}
	}
	for _, f := range Formats {
		if f == ACS { // its records are ACS entries, no source kept
			if slices.Contains(source, string(f)) {
				t.Errorf("format %s keeps no source record but is a source payload format", f)
			}
			continue
		}
		if !slices.Contains(source, string(f)) {
			t.Errorf("format %s keeps its source record but a retention rule cannot name it (ledger.PayloadKinds)", f)
		}
	}
	if len(source) != len(Formats)-1 {
		t.Errorf("source payload formats %v, ingest formats %v", source, Formats)
	}
}
