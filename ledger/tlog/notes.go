package tlog

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/cloudflare/circl/sign/mldsa/mldsa44"
	"golang.org/x/mod/sumdb/note"

	"github.com/acsledger/acsledger/verify"
)

// Signature type bytes from the c2sp.org/signed-note registry.
const (
	sigTypeEd25519            = 0x01
	sigTypeCosignatureEd25519 = 0x04 // c2sp.org/tlog-cosignature, cosignature/v1
	sigTypeCosignatureMLDSA44 = 0x06 // c2sp.org/tlog-cosignature, subtree/v1
)

// Algorithm selects the key type for [GenerateKey].
type Algorithm int

const (
	// Ed25519 keys make plain signed-note signatures (type 0x01): the log's
	// own checkpoint signature, verifiable by golang.org/x/mod/sumdb/note.
	Ed25519 Algorithm = iota
	// CosignatureEd25519 keys make timestamped cosignature/v1 signatures
	// (type 0x04), the witness format most deployed verifiers know.
	CosignatureEd25519
	// CosignatureMLDSA44 keys make ML-DSA-44 subtree/v1 cosignatures (type
	// 0x06). signed-note assigns ML-DSA-44 no plain signature type, so the
	// log's post-quantum checkpoint signature is a cosignature by the log's
	// own ML-DSA-44 key: any tlog-cosignature verifier can check it.
	CosignatureMLDSA44
)

func (a Algorithm) typeByte() byte {
	switch a {
	case CosignatureEd25519:
		return sigTypeCosignatureEd25519
	case CosignatureMLDSA44:
		return sigTypeCosignatureMLDSA44
	default:
		return sigTypeEd25519
	}
}

// keyID is the signed-note key ID: SHA-256(name || 0x0A || type || key)[:4].
func keyID(name string, typ byte, pub []byte) uint32 {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{'\n', typ})
	h.Write(pub)
	return binary.BigEndian.Uint32(h.Sum(nil))
}

// GenerateKey makes a signer key and its verifier key in the signed-note text
// encoding: "PRIVATE+KEY+<name>+<id hex>+<base64(type || seed)>" and
// "<name>+<id hex>+<base64(type || public key)>". The private part is the
// 32-byte seed for every algorithm.
func GenerateKey(r io.Reader, name string, alg Algorithm) (skey, vkey string, err error) {
	if r == nil {
		r = rand.Reader
	}
	var seed [32]byte
	if _, err := io.ReadFull(r, seed[:]); err != nil {
		return "", "", fmt.Errorf("couldn't read key seed: %w", err)
	}
	return KeyFromSeed(name, alg, seed)
}

// KeyFromSeed is [GenerateKey] with a caller-supplied seed, for deterministic
// test keys and for keys kept in a secret store.
func KeyFromSeed(name string, alg Algorithm, seed [32]byte) (skey, vkey string, err error) {
	if !validKeyName(name) {
		return "", "", fmt.Errorf("invalid key name %q", name)
	}
	pub := publicKey(alg, seed)
	typ := alg.typeByte()
	id := keyID(name, typ, pub)
	enc := base64.StdEncoding.EncodeToString
	skey = fmt.Sprintf("PRIVATE+KEY+%s+%08x+%s", name, id, enc(append([]byte{typ}, seed[:]...)))
	vkey = fmt.Sprintf("%s+%08x+%s", name, id, enc(append([]byte{typ}, pub...)))
	return skey, vkey, nil
}

func publicKey(alg Algorithm, seed [32]byte) []byte {
	if alg == CosignatureMLDSA44 {
		pk, _ := mldsa44.NewKeyFromSeed(&seed)
		return pk.Bytes()
	}
	return ed25519.NewKeyFromSeed(seed[:]).Public().(ed25519.PublicKey)
}

// validKeyName follows signed-note: non-empty, no spaces or '+'.
func validKeyName(name string) bool {
	return name != "" && !strings.ContainsAny(name, " \t\n+") && !strings.ContainsRune(name, '\u00a0')
}

// NewSigner parses a signer key made by [GenerateKey]. now stamps
// cosignatures; nil means time.Now.
func NewSigner(skey string, now func() time.Time) (note.Signer, error) {
	rest, ok := strings.CutPrefix(skey, "PRIVATE+KEY+")
	if !ok {
		return nil, errors.New("signer key does not start with PRIVATE+KEY+")
	}
	name, typ, key, id, err := splitKey(rest)
	if err != nil {
		return nil, fmt.Errorf("signer key: %w", err)
	}
	if typ == sigTypeEd25519 {
		return note.NewSigner(skey)
	}
	if len(key) != 32 {
		return nil, fmt.Errorf("signer key: seed is %d bytes, want 32", len(key))
	}
	var alg Algorithm
	switch typ {
	case sigTypeCosignatureEd25519:
		alg = CosignatureEd25519
	case sigTypeCosignatureMLDSA44:
		alg = CosignatureMLDSA44
	default:
		return nil, fmt.Errorf("signer key: unknown signature type 0x%02x", typ)
	}
	if now == nil {
		now = time.Now
	}
	c := &cosigner{name: name, alg: alg, now: now}
	seed := [32]byte(key)
	if alg == CosignatureMLDSA44 {
		_, c.mldsa = mldsa44.NewKeyFromSeed(&seed)
	} else {
		c.ed = ed25519.NewKeyFromSeed(seed[:])
	}
	c.id = keyID(name, typ, publicKey(alg, seed))
	if c.id != id {
		return nil, fmt.Errorf("signer key: key ID %08x does not match the key (want %08x)", id, c.id)
	}
	return c, nil
}

// splitKey parses "<name>+<id hex>+<base64(type || key)>".
func splitKey(s string) (name string, typ byte, key []byte, id uint32, err error) {
	parts := strings.SplitN(s, "+", 3) // base64 may contain "+"
	if len(parts) != 3 {
		return "", 0, nil, 0, errors.New("want name+id+key")
	}
	name = parts[0]
	if !validKeyName(name) {
		return "", 0, nil, 0, fmt.Errorf("invalid key name %q", name)
	}
	if len(parts[1]) != 8 {
		return "", 0, nil, 0, fmt.Errorf("key ID %q is not 8 hex digits", parts[1])
	}
	id64, err := strconv.ParseUint(parts[1], 16, 32)
	if err != nil {
		return "", 0, nil, 0, fmt.Errorf("key ID %q is not 8 hex digits", parts[1])
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(parts[2])
	if err != nil || len(raw) < 2 {
		return "", 0, nil, 0, errors.New("key material is not base64 of a type byte and a key")
	}
	return name, raw[0], raw[1:], uint32(id64), nil
}

// cosigner makes c2sp.org/tlog-cosignature signatures: a big-endian uint64
// timestamp followed by the signature over the algorithm's message.
type cosigner struct {
	name  string
	id    uint32
	alg   Algorithm
	ed    ed25519.PrivateKey
	mldsa *mldsa44.PrivateKey
	now   func() time.Time
}

func (c *cosigner) Name() string    { return c.name }
func (c *cosigner) KeyHash() uint32 { return c.id }

func (c *cosigner) Sign(text []byte) ([]byte, error) {
	ts := uint64(c.now().Unix())
	msg, err := cosignedMessage(c.alg, c.name, ts, text)
	if err != nil {
		return nil, err
	}
	sig := binary.BigEndian.AppendUint64(nil, ts)
	if c.alg == CosignatureMLDSA44 {
		out := make([]byte, mldsa44.SignatureSize)
		// FIPS 204 hedged signing with an empty context string.
		if err := mldsa44.SignTo(c.mldsa, msg, nil, true, out); err != nil {
			return nil, fmt.Errorf("couldn't sign with ML-DSA-44: %w", err)
		}
		return append(sig, out...), nil
	}
	return append(sig, ed25519.Sign(c.ed, msg)...), nil
}

// cosignedMessage builds what a cosignature signs over checkpoint text.
func cosignedMessage(alg Algorithm, name string, ts uint64, text []byte) ([]byte, error) {
	if ts > 1<<63-1 {
		return nil, errors.New("cosignature timestamp above 2^63-1")
	}
	if alg == CosignatureEd25519 {
		// tlog-cosignature: "cosignature/v1", "time <ts>", then the note text.
		return append(fmt.Appendf(nil, "cosignature/v1\ntime %d\n", ts), text...), nil
	}
	// tlog-cosignature subtree/v1: the checkpoint's three lines, not the
	// text, are signed, so only our extension-free checkpoints qualify.
	cp, err := verify.ParseCheckpointHead(text)
	if err != nil {
		return nil, err
	}
	if len(name) > 255 || len(cp.Origin) > 255 {
		return nil, errors.New("cosigner name or origin longer than 255 bytes")
	}
	m := []byte("subtree/v1\n\x00")
	m = append(m, byte(len(name)))
	m = append(m, name...)
	m = binary.BigEndian.AppendUint64(m, ts)
	m = append(m, byte(len(cp.Origin)))
	m = append(m, cp.Origin...)
	m = binary.BigEndian.AppendUint64(m, 0) // start: a checkpoint is the subtree [0, size)
	m = binary.BigEndian.AppendUint64(m, cp.Size)
	return append(m, cp.Root[:]...), nil
}
