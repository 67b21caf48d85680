package tlog

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/acsledger/acsledger/ledger/tlog/tlogtest"
	"github.com/acsledger/acsledger/verify"
)

func testCheckpoint() Checkpoint {
	return Checkpoint{Origin: testOrigin, Size: 12345, Root: sha256.Sum256([]byte("root"))}
}

func TestCheckpointRoundTrip(t *testing.T) {
	t.Parallel()
	cp := testCheckpoint()
	text := cp.Marshal()
	if !strings.HasPrefix(string(text), testOrigin+"\n12345\n") {
		t.Fatalf("checkpoint text %q", text)
	}
	back, err := ParseCheckpoint(text)
	if err != nil || back != cp {
		t.Fatalf("ParseCheckpoint = %+v, %v", back, err)
	}
	for _, bad := range []string{
		testOrigin + "\n012345\n" + base64.StdEncoding.EncodeToString(cp.Root[:]) + "\n",
		testOrigin + "\n12345\n" + base64.StdEncoding.EncodeToString(cp.Root[:31]) + "\n",
		testOrigin + "\n12345\n" + base64.StdEncoding.EncodeToString(cp.Root[:]),
		"\n12345\n" + base64.StdEncoding.EncodeToString(cp.Root[:]) + "\n",
		testOrigin + "\n+12345\n" + base64.StdEncoding.EncodeToString(cp.Root[:]) + "\n",
		string(text) + "extension\n",
	} {
		if _, err := ParseCheckpoint([]byte(bad)); err == nil {
			t.Errorf("ParseCheckpoint accepted %q", bad)
		}
	}
}

// The Ed25519 log key must interoperate with x/mod/sumdb/note both ways.
func TestEd25519KeyInteroperates(t *testing.T) {
	t.Parallel()
	skeys, vkeys := testKeys(t)
	s, err := NewSigner(skeys[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := note.Sign(&note.Note{Text: string(testCheckpoint().Marshal())}, s)
	if err != nil {
		t.Fatal(err)
	}
	v, err := note.NewVerifier(vkeys[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := note.Open(msg, note.VerifierList(v)); err != nil {
		t.Fatalf("sumdb/note rejects our Ed25519 signature: %v", err)
	}
	// Key ID per signed-note, computed here independently.
	pub := ed25519.NewKeyFromSeed(func() []byte { s := tlogtest.Seed("log 0"); return s[:] }()).Public().(ed25519.PublicKey)
	sum := sha256.Sum256(append([]byte(testOrigin+"\n\x01"), pub...))
	if v.KeyHash() != binary.BigEndian.Uint32(sum[:4]) {
		t.Fatalf("key ID %08x, want %x", v.KeyHash(), sum[:4])
	}
}

func TestCosignatures(t *testing.T) {
	t.Parallel()
	now := func() time.Time { return time.Unix(1700000000, 0) }
	for _, alg := range []Algorithm{CosignatureEd25519, CosignatureMLDSA44} {
		skey, vkey, err := KeyFromSeed("witness.test/w1", alg, sha256.Sum256([]byte{byte(alg)}))
		if err != nil {
			t.Fatal(err)
		}
		s, err := NewSigner(skey, now)
		if err != nil {
			t.Fatal(err)
		}
		v, err := verify.NoteVerifier(vkey)
		if err != nil {
			t.Fatal(err)
		}
		text := testCheckpoint().Marshal()
		signed, err := note.Sign(&note.Note{Text: string(text)}, s)
		if err != nil {
			t.Fatal(err)
		}
		n, err := note.Open(signed, note.VerifierList(v))
		if err != nil {
			t.Fatalf("alg %d: %v", alg, err)
		}
		sig, _ := base64.StdEncoding.DecodeString(n.Sigs[0].Base64)
		if ts := time.Unix(int64(binary.BigEndian.Uint64(sig[4:])), 0); !ts.Equal(now()) {
			t.Errorf("alg %d: timestamp %v", alg, ts)
		}
		// Type byte in the verifier key per tlog-cosignature.
		raw, _ := base64.StdEncoding.DecodeString(strings.SplitN(vkey, "+", 3)[2])
		if want := map[Algorithm]byte{CosignatureEd25519: 4, CosignatureMLDSA44: 6}[alg]; raw[0] != want {
			t.Errorf("alg %d: vkey type 0x%02x", alg, raw[0])
		}
		// Mangling: any single-byte change of the text or the signature fails.
		sigBytes := sig[4:]
		for i := range text {
			m := bytes.Clone(text)
			m[i] ^= 1
			if v.Verify(m, sigBytes) {
				t.Fatalf("alg %d: verified with text byte %d changed", alg, i)
			}
		}
		step := 1
		if alg == CosignatureMLDSA44 {
			step = 37 // 2428 bytes; sample to keep the test fast
		}
		for i := 0; i < len(sigBytes); i += step {
			m := bytes.Clone(sigBytes)
			m[i] ^= 0x80
			if v.Verify(text, m) {
				t.Fatalf("alg %d: verified with signature byte %d changed", alg, i)
			}
		}
	}
}

// The Ed25519 cosignature message is built here independently from the spec.
func TestEd25519CosignatureMessage(t *testing.T) {
	t.Parallel()
	seed := sha256.Sum256([]byte("w"))
	skey, _, _ := KeyFromSeed("w.test", CosignatureEd25519, seed)
	s, _ := NewSigner(skey, func() time.Time { return time.Unix(1679315147, 0) })
	text := testCheckpoint().Marshal()
	sig, err := s.Sign(text)
	if err != nil {
		t.Fatal(err)
	}
	msg := append([]byte("cosignature/v1\ntime 1679315147\n"), text...)
	pub := ed25519.NewKeyFromSeed(seed[:]).Public().(ed25519.PublicKey)
	if binary.BigEndian.Uint64(sig) != 1679315147 || !ed25519.Verify(pub, msg, sig[8:]) {
		t.Fatal("cosignature does not verify over the tlog-cosignature message")
	}
}

func TestKeyParsingRefusesBadKeys(t *testing.T) {
	t.Parallel()
	skeys, vkeys := testKeys(t)
	bad := []string{
		"", "name+00000000", strings.Replace(vkeys[1], "+", "+f", 1),
		vkeys[1][:len(vkeys[1])-8] + "AAAAAAA=", "a b+00000000+AQ==",
	}
	// A name with a space, under the key ID that name and key hash to.
	pub := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)).Public().(ed25519.PublicKey)
	typed := append([]byte{sigTypeCosignatureEd25519}, pub...)
	bad = append(bad, fmt.Sprintf("a b+%08x+%s", keyID("a b", sigTypeCosignatureEd25519, pub), base64.StdEncoding.EncodeToString(typed)))
	for _, k := range bad {
		if _, err := verify.NoteVerifier(k); err == nil {
			t.Errorf("verify.NoteVerifier accepted %q", k)
		}
	}
	// A key ID that does not match the key.
	parts := strings.SplitN(skeys[1], "+", 5)
	parts[3] = "00000000"
	if _, err := NewSigner(strings.Join(parts, "+"), nil); err == nil {
		t.Error("NewSigner accepted a wrong key ID")
	}
}

// Mangling: a stored checkpoint whose text or log signature bytes change in
// any single byte is refused by the log's own checkpoint verification.
func TestCheckpointMangling(t *testing.T) {
	t.Parallel()
	m := newMemStorage()
	l := newTestLog(t, m.storage(), Config{})
	m.addPending(0, 3)
	tlogtest.IntegrateAll(t, l)
	signed, err := l.s.LatestCheckpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.verifyCheckpoint(signed); err != nil {
		t.Fatal(err)
	}
	text, sigs, _ := bytes.Cut(signed, []byte("\n\n"))
	for i := range text {
		m := bytes.Clone(signed)
		m[i] ^= 1
		if _, err := l.verifyCheckpoint(m); err == nil {
			t.Fatalf("accepted with text byte %d changed", i)
		}
	}
	// The Ed25519 line: change each byte of the decoded key ID and signature.
	line, _, _ := bytes.Cut(sigs, []byte("\n"))
	prefix := "\u2014 " + testOrigin + " "
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(string(line), prefix))
	if err != nil {
		t.Fatal(err)
	}
	for i := range raw {
		m := bytes.Clone(raw)
		m[i] ^= 0x10
		mangled := bytes.Replace(signed, line, []byte(prefix+base64.StdEncoding.EncodeToString(m)), 1)
		if _, err := l.verifyCheckpoint(mangled); err == nil {
			t.Fatalf("accepted with signature byte %d changed", i)
		}
	}
}
