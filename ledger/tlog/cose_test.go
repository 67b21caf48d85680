package tlog

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"testing"

	"github.com/acsledger/acsledger/verify"
)

// TestCOSESigner: the log's checkpoint key, handed out for COSE receipts,
// signs COSE_Sign1 ToBeSigned structures and refuses anything else (a
// checkpoint note above all), and its kid names the log's verifier key.
func TestCOSESigner(t *testing.T) {
	t.Parallel()
	skeys, vkeys := testKeys(t)
	l, err := New(t.Context(), NewMemStorage().Storage(), Config{Origin: testOrigin, Keys: skeys})
	if err != nil {
		t.Fatal(err)
	}
	key, kid := l.COSESigner()
	if !bytes.Equal(kid, verify.COSEKeyID(vkeys[0])) || !bytes.HasPrefix([]byte(vkeys[0]), append(kid, '+')) {
		t.Errorf("kid %q does not name the log's Ed25519 verifier key %q", kid, vkeys[0])
	}
	pub := key.Public().(ed25519.PublicKey)

	tbs := []byte("\x84\x6aSignature1\x40\x40\x40")
	sig, err := key.Sign(nil, tbs, crypto.Hash(0))
	if err != nil || !ed25519.Verify(pub, tbs, sig) {
		t.Fatalf("a ToBeSigned: %v", err)
	}
	for _, msg := range [][]byte{
		[]byte(testOrigin + "\n5\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n"),
		[]byte("\x84\x6aSignature"),
		{},
	} {
		if _, err := key.Sign(nil, msg, crypto.Hash(0)); err == nil {
			t.Errorf("signed %q: the log's key must sign only COSE_Sign1 structures here", msg)
		}
	}
}
