package verify

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/cloudflare/circl/sign/mldsa/mldsa44"
	"golang.org/x/mod/sumdb/note"
)

// Signature types of the c2sp.org/signed-note registry that checkpoints
// of the acsledger Merkle log carry (docs/merkle-log.md).
const (
	noteTypeEd25519            = 0x01 // the log's own signature
	noteTypeCosignatureEd25519 = 0x04 // c2sp.org/tlog-cosignature, cosignature/v1
	noteTypeCosignatureMLDSA44 = 0x06 // c2sp.org/tlog-cosignature, subtree/v1
)

// A Checkpoint is the body of a c2sp.org/tlog-checkpoint note: the log's
// origin, its size, and the RFC 6962 root hash of its first Size leaves.
type Checkpoint struct {
	Origin string
	Size   uint64
	Root   [32]byte
}

// A CheckpointPolicy says which signatures a checkpoint needs: one valid
// signature by every key of LogKeys (so at least one key is needed), and valid cosignatures by at least
// WitnessQuorum distinct keys of Witnesses (k of n). Keys are signed-note
// verifier keys, "<name>+<key ID hex>+<base64(type || public key)>", of
// type Ed25519 (0x01) or tlog-cosignature Ed25519 (0x04) or ML-DSA-44
// (0x06).
type CheckpointPolicy struct {
	LogKeys       []string
	Witnesses     []string
	WitnessQuorum int
}

// NoteVerifier returns a verifier for a signed-note verifier key: an
// Ed25519 note key (type 0x01, checked by golang.org/x/mod/sumdb/note) or a
// tlog-cosignature key, Ed25519 cosignature/v1 (0x04) or ML-DSA-44
// subtree/v1 (0x06).
func NoteVerifier(vkey string) (note.Verifier, error) {
	parts := strings.SplitN(vkey, "+", 3) // base64 may contain "+"
	if len(parts) != 3 || parts[0] == "" || len(parts[1]) != 8 {
		return nil, fmt.Errorf("verifier key %q: want name+<8 hex digits>+<base64 key>", truncate(vkey))
	}
	name := parts[0]
	// signed-note: a key name holds no Unicode space (and no '+').
	if strings.ContainsFunc(name, unicode.IsSpace) || !utf8.ValidString(name) {
		return nil, fmt.Errorf("verifier key %q: key name %q is not a signed-note key name", truncate(vkey), truncate(name))
	}
	id, err := strconv.ParseUint(parts[1], 16, 32)
	if err != nil {
		return nil, fmt.Errorf("verifier key %q: key ID is not 8 hex digits", truncate(vkey))
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(parts[2])
	if err != nil || len(raw) < 2 {
		return nil, fmt.Errorf("verifier key %q: key is not base64 of a type byte and a key", truncate(vkey))
	}
	typ, key := raw[0], raw[1:]
	v := &cosigVerifier{name: name, id: uint32(id), typ: typ}
	switch typ {
	case noteTypeEd25519:
		return note.NewVerifier(vkey)
	case noteTypeCosignatureEd25519:
		if len(key) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("verifier key %q: Ed25519 key is %d bytes, want %d", truncate(vkey), len(key), ed25519.PublicKeySize)
		}
		v.ed = ed25519.PublicKey(key)
	case noteTypeCosignatureMLDSA44:
		v.mldsa = new(mldsa44.PublicKey)
		if err := v.mldsa.UnmarshalBinary(key); err != nil {
			return nil, fmt.Errorf("verifier key %q: ML-DSA-44 key: %w", truncate(vkey), err)
		}
	default:
		return nil, fmt.Errorf("verifier key %q: signature type 0x%02x is not one acsledger checkpoints use", truncate(vkey), typ)
	}
	if want := noteKeyID(name, typ, key); want != v.id {
		return nil, fmt.Errorf("verifier key %q: key ID %08x does not match the key (it hashes to %08x)", truncate(vkey), v.id, want)
	}
	return v, nil
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// noteKeyID is the signed-note key ID: SHA-256(name || "\n" || type || key)[:4].
func noteKeyID(name string, typ byte, key []byte) uint32 {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{'\n', typ})
	h.Write(key)
	return binary.BigEndian.Uint32(h.Sum(nil))
}

// cosigVerifier checks c2sp.org/tlog-cosignature signatures: an 8-byte
// big-endian timestamp followed by the signature over the message the
// algorithm defines.
type cosigVerifier struct {
	name  string
	id    uint32
	typ   byte
	ed    ed25519.PublicKey
	mldsa *mldsa44.PublicKey
}

func (v *cosigVerifier) Name() string    { return v.name }
func (v *cosigVerifier) KeyHash() uint32 { return v.id }

func (v *cosigVerifier) Verify(text, sig []byte) bool {
	want := 8 + ed25519.SignatureSize
	if v.typ == noteTypeCosignatureMLDSA44 {
		want = 8 + mldsa44.SignatureSize
	}
	if len(sig) != want {
		return false
	}
	ts := binary.BigEndian.Uint64(sig)
	if ts > 1<<63-1 {
		return false
	}
	if v.typ == noteTypeCosignatureEd25519 {
		// cosignature/v1: "cosignature/v1\ntime <ts>\n" then the note text.
		msg := append(fmt.Appendf(nil, "cosignature/v1\ntime %d\n", ts), text...)
		return ed25519.Verify(v.ed, msg, sig[8:])
	}
	// subtree/v1 over the checkpoint [0, size): its three lines, not the
	// text, are signed.
	cp, err := parseCheckpointText(text, true)
	if err != nil || len(v.name) > 255 || len(cp.Origin) > 255 {
		return false
	}
	m := []byte("subtree/v1\n\x00")
	m = append(m, byte(len(v.name)))
	m = append(m, v.name...)
	m = binary.BigEndian.AppendUint64(m, ts)
	m = append(m, byte(len(cp.Origin)))
	m = append(m, cp.Origin...)
	m = binary.BigEndian.AppendUint64(m, 0)
	m = binary.BigEndian.AppendUint64(m, cp.Size)
	m = append(m, cp.Root[:]...)
	return mldsa44.Verify(v.mldsa, m, nil, sig[8:])
}

// noteSig is one signature line of a signed note.
type noteSig struct {
	name string
	id   uint32
	sig  []byte
}

// splitNote splits a signed note (c2sp.org/signed-note) into its text,
// which ends in "\n", and its signature lines.
func splitNote(msg []byte) (text []byte, sigs []noteSig, err error) {
	if !utf8.Valid(msg) {
		return nil, nil, errors.New("note is not valid UTF-8")
	}
	i := bytes.LastIndex(msg, []byte("\n\n"))
	if i < 0 {
		return nil, nil, errors.New("note has no blank line before its signatures")
	}
	text, rest := msg[:i+1], msg[i+2:]
	if len(rest) == 0 || rest[len(rest)-1] != '\n' {
		return nil, nil, errors.New("note's signature block does not end in a newline")
	}
	for _, line := range strings.SplitAfter(string(rest[:len(rest)-1]), "\n") {
		line = strings.TrimSuffix(line, "\n")
		body, ok := strings.CutPrefix(line, "\u2014 ")
		if !ok {
			return nil, nil, fmt.Errorf("note signature line %q does not start with an em dash and a space", truncate(line))
		}
		name, b64, ok := strings.Cut(body, " ")
		if !ok || name == "" || strings.Contains(b64, " ") {
			return nil, nil, fmt.Errorf("note signature line %q is not \"— name signature\"", truncate(line))
		}
		raw, err := base64.StdEncoding.Strict().DecodeString(b64)
		if err != nil || len(raw) < 5 {
			return nil, nil, fmt.Errorf("note signature line %q: signature is not base64 of a key ID and a signature", truncate(line))
		}
		sigs = append(sigs, noteSig{name: name, id: binary.BigEndian.Uint32(raw), sig: raw[4:]})
	}
	return text, sigs, nil
}

// ParseCheckpoint parses c2sp.org/tlog-checkpoint note text, the part of a
// checkpoint note before its signatures, as acsledger logs write it: the
// origin, the size and the root, and no extension lines. The Merkle log
// (ledger/tlog) reads its own checkpoints with it, so the log and its
// auditors share one reader of the format.
func ParseCheckpoint(text []byte) (Checkpoint, error) {
	if !utf8.Valid(text) {
		return Checkpoint{}, errors.New("checkpoint: not valid UTF-8")
	}
	return parseCheckpointText(text, false)
}

// ParseCheckpointHead is [ParseCheckpoint] for checkpoints of any log:
// extension lines after the root are allowed and ignored. A witness reads
// the checkpoints it cosigns with it, and subtree/v1 cosignatures sign only
// these three lines.
func ParseCheckpointHead(text []byte) (Checkpoint, error) {
	if !utf8.Valid(text) {
		return Checkpoint{}, errors.New("checkpoint: not valid UTF-8")
	}
	return parseCheckpointText(text, true)
}

// parseCheckpointText reads c2sp.org/tlog-checkpoint text: origin, size in
// decimal without leading zeros, base64 root, each ending in "\n". With
// headOnly, extension lines after the three are allowed (and ignored).
func parseCheckpointText(text []byte, headOnly bool) (Checkpoint, error) {
	var c Checkpoint
	lines := strings.SplitAfterN(string(text), "\n", 4)
	if len(lines) < 3 || !strings.HasSuffix(lines[2], "\n") {
		return c, errors.New("checkpoint: fewer than 3 lines")
	}
	if len(lines) == 4 && lines[3] != "" && !headOnly {
		return c, errors.New("checkpoint: extension lines after the root (acsledger logs write none)")
	}
	c.Origin = strings.TrimSuffix(lines[0], "\n")
	if c.Origin == "" {
		return c, errors.New("checkpoint: empty origin line")
	}
	size := strings.TrimSuffix(lines[1], "\n")
	n, err := strconv.ParseUint(size, 10, 64)
	if err != nil || size[0] == '+' || (len(size) > 1 && size[0] == '0') {
		return c, fmt.Errorf("checkpoint: size %q is not a decimal number without leading zeros", truncate(size))
	}
	c.Size = n
	root, err := base64.StdEncoding.Strict().DecodeString(strings.TrimSuffix(lines[2], "\n"))
	if err != nil || len(root) != 32 {
		return c, errors.New("checkpoint: root is not base64 of 32 bytes")
	}
	copy(c.Root[:], root)
	return c, nil
}

// VerifyCheckpoint parses a signed checkpoint note and checks its
// signatures against policy. A note or checkpoint that cannot be parsed,
// or a policy key that cannot be, is an error; signatures that do not meet
// the policy are findings (checkpoint_signature_invalid,
// witness_quorum_not_met) located at where, for example "checkpoint 0".
func VerifyCheckpoint(signed []byte, policy *CheckpointPolicy, where string) (Checkpoint, []Finding, error) {
	text, sigs, err := splitNote(signed)
	if err != nil {
		return Checkpoint{}, nil, err
	}
	cp, err := parseCheckpointText(text, false)
	if err != nil {
		return Checkpoint{}, nil, err
	}
	if policy == nil {
		policy = new(CheckpointPolicy)
	}
	var fs []Finding
	mk := func(code, expected, actual, msg string) {
		fs = append(fs, Finding{Code: code, EntryIndex: -1, Where: where, Expected: expected, Actual: actual, Message: msg})
	}
	// valid reports whether the note has a signature line by v that
	// verifies, and whether it has one that does not.
	valid := func(v note.Verifier) (ok, bad bool) {
		for _, s := range sigs {
			if s.name != v.Name() || s.id != v.KeyHash() {
				continue
			}
			if v.Verify(text, s.sig) {
				ok = true
			} else {
				bad = true
			}
		}
		return ok, bad
	}
	if len(policy.LogKeys) == 0 {
		mk(CodeCheckpointSignatureInvalid, "a trusted log key", "",
			"No log key was given or carried, so nothing shows who signed the checkpoint.")
	}
	for _, k := range policy.LogKeys {
		v, err := NoteVerifier(k)
		if err != nil {
			return Checkpoint{}, nil, fmt.Errorf("log key: %w", err)
		}
		label := fmt.Sprintf("%s+%08x", v.Name(), v.KeyHash())
		switch ok, bad := valid(v); {
		case ok:
		case bad:
			mk(CodeCheckpointSignatureInvalid, label, "a signature that does not verify",
				fmt.Sprintf("The checkpoint's signature by log key %s does not verify over its text.", label))
		default:
			mk(CodeCheckpointSignatureInvalid, label, "",
				fmt.Sprintf("The checkpoint carries no signature by the trusted log key %s.", label))
		}
	}
	if policy.WitnessQuorum > 0 {
		got := 0
		seen := map[string]bool{}
		for _, k := range policy.Witnesses {
			v, err := NoteVerifier(k)
			if err != nil {
				return Checkpoint{}, nil, fmt.Errorf("witness key: %w", err)
			}
			label := fmt.Sprintf("%s+%08x", v.Name(), v.KeyHash())
			if seen[label] {
				continue
			}
			seen[label] = true
			if ok, _ := valid(v); ok {
				got++
			}
		}
		if got < policy.WitnessQuorum {
			mk(CodeWitnessQuorumNotMet, strconv.Itoa(policy.WitnessQuorum), strconv.Itoa(got),
				fmt.Sprintf("The checkpoint has valid cosignatures from %d of the %d trusted witnesses; the policy needs %d.", got, len(seen), policy.WitnessQuorum))
		}
	}
	return cp, fs, nil
}
