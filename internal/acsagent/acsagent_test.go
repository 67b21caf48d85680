package acsagent

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/acs/sig"
)

// TestEnvelope: a session's requests are signed for the session (the
// Guardian's verification with the key's public half accepts them), carry
// its session and agent ids and a fresh request_id each, and count up.
func TestEnvelope(t *testing.T) {
	key, err := sig.GenerateKey(sig.HMACSHA256, "agent-hmac")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := sig.NewKeySet(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	s, err := New("http://127.0.0.1:1", "agent-7", key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.URL() != "http://127.0.0.1:1/acs" {
		t.Errorf("URL %q", s.URL())
	}
	seen := map[string]bool{}
	for want := 1; want <= 2; want++ {
		env, err := s.Envelope("steps/toolCallRequest", s.Params(ToolCall("read_file", map[string]any{"path": Arg("a.go", "p-1", "agent_generated")})))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sig.VerifyEnvelope(env, keys, s.ID); err != nil {
			t.Fatalf("the envelope does not verify for its session: %v\n%s", err, env)
		}
		var e struct {
			ID     int `json:"id"`
			Params struct {
				RequestID string `json:"request_id"`
				Metadata  struct {
					AgentID   string `json:"agent_id"`
					SessionID string `json:"session_id"`
				} `json:"metadata"`
				Payload struct {
					Tool struct {
						Name string `json:"name"`
					} `json:"tool"`
				} `json:"payload"`
			} `json:"params"`
		}
		if err := json.Unmarshal(env, &e); err != nil {
			t.Fatal(err)
		}
		p := e.Params
		if e.ID != want || p.Metadata.AgentID != "agent-7" || p.Metadata.SessionID != s.ID || p.Payload.Tool.Name != "read_file" || seen[p.RequestID] || p.RequestID == "" {
			t.Errorf("envelope %d: %s", want, env)
		}
		seen[p.RequestID] = true
	}
	if _, err := sig.VerifyEnvelope(mustEnvelope(t, s), keys, "another-session"); err == nil {
		t.Error("an envelope verifies for another session")
	}
}

func mustEnvelope(t *testing.T, s *Session) []byte {
	t.Helper()
	env, err := s.Envelope("steps/sessionEnd", s.Params(map[string]any{"payload": map[string]any{}}))
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// TestHMACKey: a key directory must hold exactly one HMAC-SHA256 key.
func TestHMACKey(t *testing.T) {
	gen := func(alg sig.Algorithm, id string) *sig.PrivateKey {
		k, err := sig.GenerateKey(alg, id)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	for _, tc := range []struct {
		name string
		keys []*sig.PrivateKey
		err  string
	}{
		{"one", []*sig.PrivateKey{gen(sig.ECDSAP256, "e"), gen(sig.HMACSHA256, "h")}, ""},
		{"none", []*sig.PrivateKey{gen(sig.ECDSAP256, "e")}, "holds 0 HMAC-SHA256 keys"},
		{"two", []*sig.PrivateKey{gen(sig.HMACSHA256, "h1"), gen(sig.HMACSHA256, "h2")}, "holds 2 HMAC-SHA256 keys"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "keys")
			if err := sig.WriteKeyDir(dir, tc.keys...); err != nil {
				t.Fatal(err)
			}
			k, err := HMACKey(dir)
			switch {
			case tc.err == "" && (err != nil || k.KeyID() != "h"):
				t.Errorf("HMACKey: %v, %v", k, err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("error %v, want one saying %q", err, tc.err)
			}
		})
	}
	if _, err := HMACKey(filepath.Join(t.TempDir(), "missing")); err == nil || !strings.Contains(err.Error(), "couldn't load keys") {
		t.Errorf("a missing directory: %v", err)
	}
}
