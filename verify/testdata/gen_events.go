//go:build ignore

// gen_events writes testdata/events: the entries of bundles/valid.json
// exported as a sink delivers them, in each format, and copies of them
// broken the ways `acsverify events` must notice. Run it from this
// directory after gen_bundles.go: go run gen_events.go.
package main

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/acs/trace"
)

func main() {
	b, err := os.ReadFile(filepath.Join("bundles", "valid.json"))
	if err != nil {
		log.Fatal(err)
	}
	var bundle struct {
		SessionID   string   `json:"session_id"`
		Checkpoints []string `json:"checkpoints"`
		Anchors     []struct {
			Position  int64  `json:"position"`
			LeafIndex uint64 `json:"leaf_index"`
		} `json:"anchors"`
		Responses []json.RawMessage `json:"responses"`
		Entries   []json.RawMessage `json:"entries"`
	}
	if err := json.Unmarshal(b, &bundle); err != nil {
		log.Fatal(err)
	}
	origin, _, _ := strings.Cut(bundle.Checkpoints[0], "\n")
	// The covering checkpoint OCSF 1.9 events name: the bundle's largest.
	var cp *trace.Checkpoint
	for _, note := range bundle.Checkpoints {
		lines := strings.SplitN(note, "\n", 4)
		size, err := strconv.ParseUint(lines[1], 10, 64)
		if err != nil {
			log.Fatal(err)
		}
		root, err := base64.StdEncoding.DecodeString(lines[2])
		if err != nil {
			log.Fatal(err)
		}
		if cp == nil || size > cp.Size {
			cp = &trace.Checkpoint{Origin: lines[0], Size: size, RootHash: hex.EncodeToString(root)}
		}
	}
	responses := map[string]json.RawMessage{}
	for _, r := range bundle.Responses {
		var env struct {
			Result struct {
				RequestID string `json:"request_id"`
			} `json:"result"`
		}
		if err := json.Unmarshal(r, &env); err != nil {
			log.Fatal(err)
		}
		responses[env.Result.RequestID] = r
	}
	leaves := map[int64]uint64{}
	for _, a := range bundle.Anchors {
		leaves[a.Position] = a.LeafIndex
	}

	// events[format][position] are the events of the entry at position.
	events := map[trace.Format][][][]byte{}
	var prev *acs.Hash
	for i, raw := range bundle.Entries {
		e, err := acs.ParseEntry(raw)
		if err != nil {
			log.Fatal(err)
		}
		h := acs.EntryHash(e.Content, prev)
		prev = &h
		ev := trace.Evidence{Origin: origin, SessionID: bundle.SessionID, AgentID: "report-builder", Position: int64(i),
			EntryHash: h.String(), Source: "guardian", Entry: raw, Response: responses[e.StepID], Checkpoint: cp}
		if li, ok := leaves[int64(i)]; ok {
			ev.LeafIndex = &li
		}
		for _, f := range trace.Formats {
			evs, err := trace.EncodeAll(f, ev, trace.Options{})
			if err != nil {
				log.Fatal(err)
			}
			events[f] = append(events[f], evs)
		}
	}
	all := func(f trace.Format, skip func(pos, k int) bool) [][]byte {
		var out [][]byte
		for pos, evs := range events[f] {
			for k, e := range evs {
				if skip == nil || !skip(pos, k) {
					out = append(out, e)
				}
			}
		}
		return out
	}
	dir := "events"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Fatal(err)
	}
	write := func(name string, lines [][]byte) {
		var buf bytes.Buffer
		for _, l := range lines {
			buf.Write(l)
			buf.WriteByte('\n')
		}
		if err := os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	for _, f := range trace.Formats {
		write("valid."+string(f)+".ndjson", all(f, nil))
	}

	// pull.ndjson: the pull API's {cursor, event} lines, with one line
	// delivered twice (at least once allows it) and a heartbeat line.
	var pull [][]byte
	for i, e := range all(trace.OCSF, nil) {
		line := fmt.Appendf(nil, `{"cursor":"c%d","event":%s}`, i+1, e)
		pull = append(pull, line)
		if i == 2 {
			pull = append(pull, line)
		}
		if i == 4 {
			// A heartbeat of the follow stream, saved with the events.
			pull = append(pull, fmt.Appendf(nil, `{"cursor":"c%d","heartbeat":"2026-12-02T04:00:00Z"}`, i+1))
		}
	}
	write("pull.ndjson", pull)

	// missing.ndjson: entry 3 left out, and the Detection Finding of entry
	// 5's deny.
	write("missing.ndjson", all(trace.OCSF, func(pos, k int) bool { return pos == 3 || (pos == 5 && k == 1) }))

	// mismatch.ndjson: entry 5's deny turned into an allow by the copy
	// (severity and the entry's disposition), and entry 2's entry hash
	// replaced.
	mm := all(trace.OCSF, nil)
	for i, e := range mm {
		s := string(e)
		switch {
		case strings.Contains(s, `"position":5,`) && !strings.Contains(s, `"class_uid":2004`):
			s = strings.Replace(s, `"severity_id":4,"severity":"High"`, `"severity_id":1,"severity":"Informational"`, 1)
			s = strings.Replace(s, `"disposition":"deny"`, `"disposition":"allow"`, 1)
		case strings.Contains(s, `"position":2,`):
			h := events[trace.OCSF][2][0]
			var p struct {
				Unmapped struct {
					ACSLedger struct {
						EntryHash string `json:"entry_hash"`
					} `json:"acsledger"`
				} `json:"unmapped"`
			}
			if err := json.Unmarshal(h, &p); err != nil {
				log.Fatal(err)
			}
			s = strings.ReplaceAll(s, p.Unmapped.ACSLedger.EntryHash, strings.Repeat("0", 64))
		}
		mm[i] = []byte(s)
	}
	write("mismatch.ndjson", mm)

	// other_session.ndjson: the valid copy and one event of a session no
	// bundle covers.
	other := all(trace.CloudEvents, nil)
	other = append(other, bytes.ReplaceAll(other[0], []byte(bundle.SessionID), []byte("sess-not-in-the-bundle")))
	write("other_session.ndjson", other)
}
