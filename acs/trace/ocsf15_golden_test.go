package trace

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"
)

// TestOCSF15Golden holds ocsf@1.5 to the bytes the encoder wrote before
// OCSF 1.9 became the default: testdata/ocsf-1.5-golden.ndjson was written
// by gen_golden_ocsf15.go with acs/trace at commit a40c2a7 (its trace.OCSF
// then). Every event of every case must come out byte for byte the same.
func TestOCSF15Golden(t *testing.T) {
	f, err := os.Open("testdata/ocsf-1.5-golden.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	n, events := 0, 0
	for sc.Scan() {
		n++
		var c struct {
			Name     string   `json:"name"`
			Evidence Evidence `json:"evidence"`
			Entry    string   `json:"entry"`
			Response string   `json:"response"`
			Params   string   `json:"params"`
			Options  Options  `json:"options"`
			Events   []string `json:"events"`
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("line %d: %v", n, err)
		}
		ev := c.Evidence
		ev.Entry = json.RawMessage(c.Entry)
		if c.Response != "" {
			ev.Response = json.RawMessage(c.Response)
		}
		if c.Params != "" {
			ev.Params = json.RawMessage(c.Params)
		}
		got, err := EncodeAll(OCSF15, ev, c.Options)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if len(got) != len(c.Events) {
			t.Fatalf("%s: %d events, want %d", c.Name, len(got), len(c.Events))
		}
		for i := range got {
			events++
			if string(got[i]) != c.Events[i] {
				t.Errorf("%s event %d differs from the 1.5 encoder's\n got %s\nwant %s", c.Name, i, got[i], c.Events[i])
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	// Every step type x decision x agent, the odd entries, the params cases.
	if n < 290 || events < 450 {
		t.Fatalf("the golden file has %d cases and %d events; it was cut short", n, events)
	}
}
