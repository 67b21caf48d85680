package paramcrypt_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/acsledger/acsledger/ledger/paramcrypt"
)

var params = []byte(`{"tool":{"name":"http"},"arguments":{"headers":{"Authorization":"Bearer sk-live-123"}}}`)

func sealer(t *testing.T, b byte) *paramcrypt.Sealer {
	t.Helper()
	s, err := paramcrypt.New(bytes.Repeat([]byte{b}, paramcrypt.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRoundTripAndBinding(t *testing.T) {
	s := sealer(t, 1)
	rec, err := s.Seal("sess-a", 3, params)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(rec, []byte("sk-live-123")) || !paramcrypt.Sealed(rec) {
		t.Fatalf("the record holds the secret in clear or is not marked sealed: %q", rec)
	}
	again, _ := s.Seal("sess-a", 3, params)
	if bytes.Equal(rec, again) {
		t.Fatal("two seals of the same params are equal: no fresh key or nonce")
	}
	if got, err := s.Open("sess-a", 3, rec); err != nil || !bytes.Equal(got, params) {
		t.Fatalf("Open: %q, %v", got, err)
	}
	for _, c := range []struct {
		name    string
		s       *paramcrypt.Sealer
		session string
		pos     int64
	}{
		{"another position", s, "sess-a", 4},
		{"another session", s, "sess-b", 3},
		{"another master key", sealer(t, 2), "sess-a", 3},
	} {
		if got, err := c.s.Open(c.session, c.pos, rec); !errors.Is(err, paramcrypt.ErrOpen) || got != nil {
			t.Errorf("%s: %q, %v; want ErrOpen", c.name, got, err)
		}
	}
	if _, err := (*paramcrypt.Sealer)(nil).Open("sess-a", 3, rec); !errors.Is(err, paramcrypt.ErrNoKey) {
		t.Errorf("without a key: %v", err)
	}
	if got, err := s.Open("sess-a", 3, params); err != nil || !bytes.Equal(got, params) {
		t.Errorf("params stored in clear: %q, %v; want them as they are", got, err)
	}
}

// TestMangled: every single-byte change to a sealed record fails to open.
func TestMangled(t *testing.T) {
	s := sealer(t, 1)
	rec, err := s.Seal("s", 0, params)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rec {
		m := bytes.Clone(rec)
		m[i] ^= 0x01
		if got, err := s.Open("s", 0, m); !errors.Is(err, paramcrypt.ErrOpen) || got != nil {
			t.Fatalf("byte %d flipped: %q, %v; want ErrOpen", i, got, err)
		}
	}
	if _, err := s.Open("s", 0, rec[:len(rec)-1]); err == nil {
		t.Fatal("a truncated record opens")
	}
}

func TestKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "params-master.key")
	k, err := paramcrypt.GenerateKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, %v; want 0600", fi.Mode(), err)
	}
	b, _ := os.ReadFile(path)
	if got, err := paramcrypt.ParseKey(string(b)); err != nil || !bytes.Equal(got, k) {
		t.Fatalf("read back %x, %v", got, err)
	}
	if _, err := paramcrypt.GenerateKeyFile(path); err == nil {
		t.Fatal("an existing key file was overwritten")
	}
	if _, err := paramcrypt.ParseKey("abcd"); err == nil {
		t.Fatal("a short key parsed")
	}
}

// TestSourceLabelsApart: source records seal and open like params, bound
// to their entry, and a params record and a source record of one step
// do not open as each other.
func TestSourceLabelsApart(t *testing.T) {
	s := sealer(t, 1)
	src := []byte(`{"decision_id":"d-1","input":{"user":"alice"}}` + "\n")
	sealed, err := s.SealSource("sess", 3, src)
	if err != nil {
		t.Fatal(err)
	}
	if !paramcrypt.Sealed(sealed) || bytes.Contains(sealed, []byte("alice")) {
		t.Fatalf("sealed source %q", sealed)
	}
	got, err := s.OpenSource("sess", 3, sealed)
	if err != nil || !bytes.Equal(got, src) {
		t.Fatalf("OpenSource: %q, %v", got, err)
	}
	if _, err := s.OpenSource("sess", 4, sealed); !errors.Is(err, paramcrypt.ErrOpen) {
		t.Errorf("source opened at another position: %v", err)
	}
	if _, err := s.Open("sess", 3, sealed); !errors.Is(err, paramcrypt.ErrOpen) {
		t.Errorf("a source record opened as params: %v", err)
	}
	rec, err := s.Seal("sess", 3, []byte(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.OpenSource("sess", 3, rec); !errors.Is(err, paramcrypt.ErrOpen) {
		t.Errorf("a params record opened as a source: %v", err)
	}
	// A source stored in clear (no master key then) reads as it is.
	if got, err := s.OpenSource("sess", 3, src); err != nil || !bytes.Equal(got, src) {
		t.Errorf("clear source: %q, %v", got, err)
	}
}
