package rpcerr_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/acsledger/acsledger/acs/rpcerr"
)

// TestRegistry pins every code and name to ACS §17 and §17.1.
func TestRegistry(t *testing.T) {
	want := []struct {
		code int
		name string
	}{
		{-32700, "Parse error"},
		{-32600, "Invalid Request"},
		{-32601, "Method not found"},
		{-32602, "Invalid params"},
		{-32603, "Internal error"},
		{-32000, "SESSION_REFUSED"},
		{-32001, "UNSUPPORTED_VERSION"},
		{-32002, "PROVENANCE_REQUIRED"},
		{-32003, "CAPABILITY_NOT_NEGOTIATED"},
		{-32004, "SIGNATURE_INVALID"},
		{-32005, "REPLAY_DETECTED"},
		{-32006, "TIMESTAMP_OUT_OF_WINDOW"},
		{-32007, "CHAIN_MISMATCH"},
	}
	codes := rpcerr.Codes()
	if len(codes) != len(want) {
		t.Fatalf("Codes() has %d entries, want %d", len(codes), len(want))
	}
	for i, w := range want {
		c := codes[i]
		if int(c) != w.code || c.Name() != w.name {
			t.Errorf("entry %d = %d %q, want %d %q", i, int(c), c.Name(), w.code, w.name)
		}
		if got, ok := rpcerr.CodeByName(w.name); !ok || got != c {
			t.Errorf("CodeByName(%q) = %v, %v", w.name, got, ok)
		}
		if got := rpcerr.CodeOf(fmt.Errorf("wrapped: %w", c.Sentinel())); got != c {
			t.Errorf("CodeOf(wrapped sentinel of %v) = %v", c, got)
		}
		if c.IsACS() != (w.code >= -32099 && w.code <= -32000) {
			t.Errorf("%v.IsACS() = %v", c, c.IsACS())
		}
	}
	if n := rpcerr.Code(-32050).Name(); n != "" {
		t.Errorf("unregistered code has name %q", n)
	}
}

func TestCodeOf(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want rpcerr.Code
	}{
		{"nil", nil, 0},
		{"plain error is internal", errors.New("disk full"), rpcerr.InternalError},
		{"ACS code wins over generic", fmt.Errorf("%w: %w", rpcerr.ErrInvalidParams, rpcerr.ErrSignatureInvalid), rpcerr.SignatureInvalid},
		{"joined", errors.Join(errors.New("x"), rpcerr.ErrReplayDetected), rpcerr.ReplayDetected},
		{"*Error in chain", fmt.Errorf("ctx: %w", rpcerr.New(rpcerr.TimestampOutOfWindow, "late")), rpcerr.TimestampOutOfWindow},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rpcerr.CodeOf(tt.err); got != tt.want {
				t.Errorf("CodeOf = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFromWire(t *testing.T) {
	e := rpcerr.From(fmt.Errorf("key_id %q unknown: %w", "k1", rpcerr.ErrSignatureInvalid))
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"code":-32004,"message":"SIGNATURE_INVALID","data":{"message":"key_id \"k1\" unknown: signature invalid","reason":"signature_invalid"}}`
	if string(b) != want {
		t.Errorf("wire form\n got %s\nwant %s", b, want)
	}
	if !errors.Is(e, rpcerr.ErrSignatureInvalid) {
		t.Error("From result does not match its sentinel")
	}
	if errors.Is(e, rpcerr.ErrReplayDetected) {
		t.Error("From result matches another sentinel")
	}

	internal := rpcerr.From(errors.New("open /var/lib/secret: permission denied"))
	if internal.Code != rpcerr.InternalError || internal.Data["message"] != "internal error" {
		t.Errorf("internal error leaked detail: %+v", internal)
	}

	v := rpcerr.New(rpcerr.UnsupportedVersion, "no common version")
	v.Data["supported_versions"] = []string{"0.1.0"}
	b, _ = json.Marshal(v)
	want = `{"code":-32001,"message":"UNSUPPORTED_VERSION","data":{"message":"no common version","reason":"unsupported_version","supported_versions":["0.1.0"]}}`
	if string(b) != want {
		t.Errorf("wire form\n got %s\nwant %s", b, want)
	}
}

func ExampleFrom() {
	err := fmt.Errorf("duplicate request_id: %w", rpcerr.ErrReplayDetected)
	e := rpcerr.From(err)
	fmt.Println(int(e.Code), e.Message, e.Data["reason"])
	// Output: -32005 REPLAY_DETECTED replay_detected
}
