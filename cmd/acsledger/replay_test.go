package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/guardian/policy"
	"github.com/acsledger/acsledger/ledger/evidence/evidencetest"
)

func TestReplayCommand(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	permissive := &policy.Bundle{ID: policy.BaselineID, Version: "0.0.0-permissive", Modules: map[string]string{
		"permit.rego": "package acs\n\ndecision := {\"decision\": \"allow\", \"rule_ids\": [\"permit.all\"]}\n",
	}}
	if _, err := policy.New(context.Background(), permissive, f.Store, nil); err != nil {
		t.Fatal(err)
	}
	deny := f.Step(t, "steps/toolCallRequest", "deny")
	dir := t.TempDir()
	params := filepath.Join(dir, "params.json")
	os.WriteFile(params, deny.Params, 0o600)
	// The whole envelope is accepted too.
	envelope := filepath.Join(dir, "request.json")
	env, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": deny.Method, "params": deny.Params})
	os.WriteFile(envelope, env, 0o600)

	for _, c := range []struct {
		name string
		args []string
		code int
		out  string
		err  string
	}{
		{"same", []string{"--params", params, deny.RequestID}, 0, "same decision: deny", ""},
		{"envelope", []string{"--session", deny.SessionID, "--params", envelope, deny.RequestID}, 0, "same decision: deny", ""},
		{"other version", []string{"--policy-version", "0.0.0-permissive", "--params", params, deny.RequestID}, 1,
			"different decision (recorded != replayed):\n  decision: \"deny\" != \"allow\"", "differs"},
		{"json", []string{"--json", "--params", params, deny.RequestID}, 0, `"same_decision": true`, ""},
		{"no params", []string{deny.RequestID}, 2, "", "--params is required"},
		{"flag after the argument", []string{"--params", params, deny.RequestID, "--policy-version", "x"}, 2, "", "exactly one REQUEST_ID"},
		{"unknown request", []string{"--params", params, "nope"}, 1, "", "no entry has step_id nope"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"replay", "--db", f.URL}, c.args...)
			code := run(context.Background(), args, &stdout, &stderr)
			if code != c.code || !strings.Contains(stdout.String(), c.out) || !strings.Contains(stderr.String(), c.err) {
				t.Errorf("exit %d\nstdout %s\nstderr %s\nwant exit %d, %q, %q", code, stdout.String(), stderr.String(), c.code, c.out, c.err)
			}
		})
	}
}
