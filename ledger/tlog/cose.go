package tlog

import (
	"crypto"
	"crypto/ed25519"
	"errors"
	"io"
	"strings"

	"github.com/acsledger/acsledger/verify"
)

// coseKey is the log's Ed25519 checkpoint key as a crypto.Signer that
// signs COSE_Sign1 ToBeSigned structures only (docs/receipts.md, "The
// COSE form"). One key signs both notes and COSE receipts safely: a note
// text is UTF-8 and a ToBeSigned starts with 0x84, so neither signature
// can be replayed as the other; the guard keeps it that way.
type coseKey struct {
	priv ed25519.PrivateKey
	kid  []byte
}

func newCOSEKey(skey, vkey string) (*coseKey, error) {
	rest, _ := strings.CutPrefix(skey, "PRIVATE+KEY+")
	_, typ, seed, _, err := splitKey(rest)
	if err != nil {
		return nil, err
	}
	if typ != sigTypeEd25519 || len(seed) != ed25519.SeedSize {
		return nil, errors.New("the first key must be an Ed25519 note key")
	}
	return &coseKey{priv: ed25519.NewKeyFromSeed(seed), kid: verify.COSEKeyID(vkey)}, nil
}

func (k *coseKey) Public() crypto.PublicKey { return k.priv.Public() }

func (k *coseKey) Sign(r io.Reader, msg []byte, opts crypto.SignerOpts) ([]byte, error) {
	if !verify.IsCOSESigPrefix(msg) {
		return nil, errors.New("tlog: the log's key signs COSE_Sign1 structures only here")
	}
	return k.priv.Sign(r, msg, opts)
}

// COSESigner returns the log's Ed25519 checkpoint key as a signer of
// COSE_Sign1 structures (it refuses any other message) and its COSE kid
// ([verify.COSEKeyID] of the log's verifier key).
func (l *Log) COSESigner() (crypto.Signer, []byte) { return l.cose, l.cose.kid }
