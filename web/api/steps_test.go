package api

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestRedaction(t *testing.T) {
	for in, want := range map[string]string{
		"key AKIAIOSFODNN7EXAMPLE here":          "key [redacted] here",
		"Authorization: Bearer abc.def.ghi":      "Authorization: [redacted]",
		"token acsl_0123456789abcdefghij":        "token [redacted]",
		"ls -la /tmp":                            "ls -la /tmp",
		"x " + strings.Repeat("Zm9v", 12) + " y": "x [redacted] y",
	} {
		if got := redact(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
	args := map[string]json.RawMessage{
		"password": json.RawMessage(`{"value":"hunter2"}`),
		"path":     json.RawMessage(`{"value":"` + strings.Repeat("a/", 50) + `"}`),
	}
	got := argsView(args)
	if !strings.HasPrefix(got, "password=[redacted], path=a/a/") || !strings.HasSuffix(got, "…") || strings.Contains(got, "hunter2") {
		t.Errorf("argsView: %q", got)
	}
}
