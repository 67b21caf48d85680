package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acsledger/acsledger/verify"
)

// TestEventsCheckedAgainstBundle: the events the real binary's pull API
// answers, in each format, are checked by the real acsverify binary
// against the session's evidence bundle from the same server: all match
// (exit 0); an edited event is event_mismatch and a dropped one
// event_missing (exit 1).
func TestEventsCheckedAgainstBundle(t *testing.T) {
	dir := t.TempDir()
	acsverify := filepath.Join(dir, "acsverify")
	if out, err := exec.Command("go", "build", "-o", acsverify, "../acsverify").CombinedOutput(); err != nil {
		t.Fatalf("couldn't build acsverify: %v\n%s", err, out)
	}
	s := startServer(t, "--db", filepath.Join(dir, "db"))
	defer func() {
		if t.Failed() {
			t.Logf("server log:\n%s", s.log())
		}
	}()
	// Entries of a writer's own step type (not steps/*, which a bundle
	// checks against signed responses these appends do not have); the
	// third is a deny, so OCSF gives it a Detection Finding too.
	const session = "sess-events-check"
	for i, d := range []string{"allow", "allow", "deny", "allow"} {
		body := fmt.Sprintf(`{"entry_id":"ev-%d","step_id":"ev-req-%d","step_type":"external/toolCall","timestamp":"2026-12-02T04:00:0%dZ","agent_id":"agent-e2e","decision":{"disposition":%q,"reasoning":"r%d"}}`, i, i, i, d, i)
		if code, out := post(t, s.url+"/api/v1/sessions/"+session+"/entries?agent_id=agent-e2e", body); code != http.StatusCreated {
			t.Fatalf("append %d: %d %v", i, code, out)
		}
	}
	// The bundle once a checkpoint covers the session (it verifies then).
	bundle := filepath.Join(dir, "bundle.json")
	waitUntil(t, "a bundle that verifies", 30*time.Second, func() bool {
		code, b := get(t, s.url+"/api/v1/sessions/"+session+"/bundle")
		if code != http.StatusOK {
			return false
		}
		r, err := verify.VerifyBundle(bytes.NewReader(b), nil)
		if err != nil || !r.Verified() || r.Entries != 4 {
			return false
		}
		return os.WriteFile(bundle, b, 0o644) == nil
	})

	// pull reads every line of the pull API in format f, as it answers them.
	pull := func(f string) []string {
		var lines []string
		after := ""
		for range 100 {
			code, b := get(t, fmt.Sprintf("%s/api/v1/events?format=%s&limit=50&after=%s", s.url, f, after))
			if code != http.StatusOK {
				t.Fatalf("GET events: %d %s", code, b)
			}
			var page []string
			sc := bufio.NewScanner(bytes.NewReader(b))
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				if l := sc.Text(); strings.HasPrefix(l, `{"cursor"`) {
					page = append(page, l)
				}
			}
			lines = append(lines, page...)
			// Each read is itself recorded in the ledger (the access log),
			// so the stream never runs dry: a short page is its end.
			if len(page) < 50 {
				return lines
			}
			p, err := trace(page[len(page)-1])
			if err != nil {
				t.Fatal(err)
			}
			after = p
		}
		t.Fatal("the pull API did not end")
		return nil
	}
	run := func(file string, wantCode int, want ...string) {
		t.Helper()
		cmd := exec.Command(acsverify, "events", "--bundle", bundle, file)
		out, _ := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != wantCode {
			t.Fatalf("acsverify events %s: exit %d, want %d\n%s", filepath.Base(file), code, wantCode, out)
		}
		for _, w := range want {
			if !strings.Contains(string(out), w) {
				t.Errorf("acsverify events %s: output lacks %q\n%s", filepath.Base(file), w, out)
			}
		}
	}
	// ocsf is OCSF 1.9 with its record integrity; ocsf@1.5 the events as
	// they were before it, still selectable.
	for _, f := range []string{"ocsf", "ocsf@1.5", "cloudevents", "acs"} {
		var lines []string
		waitUntil(t, "the session's entries in the pull API", 30*time.Second, func() bool {
			lines = pull(f)
			n := 0
			for _, l := range lines {
				if strings.Contains(l, session) {
					n++
				}
			}
			return n >= 4
		})
		file := filepath.Join(dir, f+".ndjson")
		if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		events := "4 events"
		if strings.HasPrefix(f, "ocsf") {
			events = "5 events" // the deny's Detection Finding
		}
		run(file, 0, "verified: "+events+" match the ledger")
	}

	// The OCSF copy with the deny passed off as informational, and with
	// the first entry's event dropped.
	b, err := os.ReadFile(filepath.Join(dir, "ocsf.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	var edited, dropped []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.Contains(l, `"position":0,`) && strings.Contains(l, session) {
			edited = append(edited, l)
			continue // dropped from the second copy
		}
		dropped = append(dropped, l)
		if strings.Contains(l, `"class_uid":2004`) && strings.Contains(l, session) {
			l = strings.Replace(l, `"severity_id":4,"severity":"High"`, `"severity_id":1,"severity":"Informational"`, 1)
		}
		edited = append(edited, l)
	}
	editedFile, droppedFile := filepath.Join(dir, "edited.ndjson"), filepath.Join(dir, "dropped.ndjson")
	os.WriteFile(editedFile, []byte(strings.Join(edited, "\n")+"\n"), 0o644)
	os.WriteFile(droppedFile, []byte(strings.Join(dropped, "\n")+"\n"), 0o644)
	run(editedFile, 1, "event_mismatch", "differs from the ledger's entry at severity", `expected: "High"`)
	run(droppedFile, 1, "event_missing", "the copy has no event of entry 0 of session "+session)
}

// trace returns the cursor of a pull API line.
func trace(line string) (string, error) {
	const pre = `{"cursor":"`
	if !strings.HasPrefix(line, pre) {
		return "", fmt.Errorf("not a pull line: %.80s", line)
	}
	rest := line[len(pre):]
	i := strings.IndexByte(rest, '"')
	if i < 0 {
		return "", fmt.Errorf("no cursor end: %.80s", line)
	}
	return rest[:i], nil
}
