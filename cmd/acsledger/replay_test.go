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
	"github.com/acsledger/acsledger/internal/evidencetest"
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
	otherParams := filepath.Join(dir, "other.json")
	os.WriteFile(otherParams, f.Step(t, "steps/toolCallRequest", "allow").Params, 0o600)
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
		// From the ledger alone: no --params.
		{"same", []string{deny.RequestID}, 0, "params from the ledger\nsame decision: deny", ""},
		{"session", []string{"--session", deny.SessionID, deny.RequestID}, 0, "same decision: deny", ""},
		{"other version", []string{"--policy-version", "0.0.0-permissive", deny.RequestID}, 1,
			"different decision (recorded != replayed):\n  decision: \"deny\" != \"allow\"", "differs"},
		{"json", []string{"--json", deny.RequestID}, 0, `"params_from": "ledger"`, ""},
		// Supplied params are checked and used.
		{"params", []string{"--params", params, deny.RequestID}, 0, "params from the --params file\nsame decision: deny", ""},
		{"envelope", []string{"--session", deny.SessionID, "--params", envelope, deny.RequestID}, 0, "same decision: deny", ""},
		{"other request's params", []string{"--params", otherParams, deny.RequestID}, 1, "", "not the recorded request"},
		{"flag after the argument", []string{deny.RequestID, "--policy-version", "x"}, 2, "", "exactly one REQUEST_ID"},
		{"unknown request", []string{"nope"}, 1, "", "no entry has step_id nope"},
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
