package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/guardian/policy"
	"github.com/acsledger/acsledger/internal/evidencetest"
)

// TestWhatIfCommand: exit 0 when nothing changes, 1 with the changed
// steps when something does (as text and as JSON lines), 2 on a bundle
// that does not compile and on bad flags, naming them.
func TestWhatIfCommand(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	dir := t.TempDir()
	same, deny, broken := filepath.Join(dir, "same"), filepath.Join(dir, "deny"), filepath.Join(dir, "broken")
	b := policy.Baseline()
	files := map[string][]byte{"data.json": b.Data}
	for p, src := range b.Modules {
		files[p] = []byte(src)
	}
	write := func(root string, extra map[string]string) {
		for p, data := range files {
			os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755)
			os.WriteFile(filepath.Join(root, p), data, 0o644)
		}
		for p, src := range extra {
			os.WriteFile(filepath.Join(root, p), []byte(src), 0o644)
		}
	}
	write(same, nil)
	write(deny, map[string]string{"candidate.rego": "package acs.tools\n\nimport data.acs.call\n\nfindings contains {\"disposition\": \"deny\", \"rule_id\": \"candidate.no_read_file\", \"reason_codes\": [\"x\"], \"reasoning\": \"no\"} if {\n\tcall.is_tool_call\n\tcall.name == \"read_file\"\n}\n"})
	write(broken, map[string]string{"broken.rego": "package acs.broken\n\nx := {\n"})
	// The same candidate as an OPA bundle archive.
	var tgz bytes.Buffer
	zw := gzip.NewWriter(&tgz)
	tw := tar.NewWriter(zw)
	for p, data := range files {
		tw.WriteHeader(&tar.Header{Name: p, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg})
		tw.Write(data)
	}
	tw.Close()
	zw.Close()
	archive := filepath.Join(dir, "same.tar.gz")
	os.WriteFile(archive, tgz.Bytes(), 0o644)

	for _, c := range []struct {
		name     string
		args     []string
		code     int
		out, err string
	}{
		{"unchanged", []string{"--policy", same}, 0, "0 changed", ""},
		{"archive", []string{"--policy", archive}, 0, "0 changed", ""},
		{"changed", []string{"--policy", deny}, 1, "allow->deny", "would change"},
		{"changed steps", []string{"--policy", deny, "--tool", "read_file"}, 1, "steps/toolCallRequest read_file: allow [baseline.default_allow] -> deny [candidate.no_read_file]", ""},
		{"json", []string{"--policy", deny, "--json"}, 1, `"kind":"allow->deny"`, ""},
		{"does not compile", []string{"--policy", broken}, 2, "", "broken.rego:"},
		{"no policy", []string{}, 2, "", "--policy is required"},
		{"inverted range", []string{"--policy", same, "--since", "2026-12-02T00:00:00Z", "--until", "2026-12-01T00:00:00Z"}, 2, "", "--until"},
		{"unknown decision", []string{"--policy", same, "--decision", "maybe"}, 2, "", "--decision \"maybe\""},
		{"over the cap", []string{"--policy", same, "--limit", "99999999999"}, 2, "", "--limit"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), append([]string{"whatif", "--db", f.URL}, c.args...), &stdout, &stderr)
			if code != c.code || !strings.Contains(stdout.String(), c.out) || !strings.Contains(stderr.String(), c.err) {
				t.Errorf("exit %d\nstdout %s\nstderr %s\nwant exit %d, %q, %q", code, stdout.String(), stderr.String(), c.code, c.out, c.err)
			}
			if c.name == "json" {
				lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
				var last struct {
					Type    string `json:"type"`
					Changed int    `json:"changed"`
				}
				if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last.Type != "summary" || last.Changed != len(lines)-1 {
					t.Errorf("the last line is not the summary of %d changes: %s", len(lines)-1, lines[len(lines)-1])
				}
			}
		})
	}
}
