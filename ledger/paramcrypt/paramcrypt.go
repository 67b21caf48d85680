// Package paramcrypt encrypts request params at rest: the params a
// Guardian stores beside an entry carry the secrets MODIFY redacts from the
// decision, so a stolen database file must not yield them.
//
// Each params record gets its own data key (AES-256-GCM), wrapped by the
// master key (AES-256-GCM) and stored in the record beside the ciphertext:
// envelope encryption. Erasing the record (ledger.ParamsEraser.
// EraseParams) deletes its data key with it, so a copy of the ciphertext
// that outlives the row (a backup, the WAL, a dead tuple) cannot be read
// even with the master key: crypto-shredding per step, which is the unit
// the ledger erases. The master key never enters the database.
//
// Both the data key's wrapping and the params' encryption take a fresh
// random nonce and bind the record's place, session id and position, as
// additional data, so a ciphertext moved to another step does not open.
package paramcrypt

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// KeySize is the size of the master key and of each data key.
const KeySize = 32

// magic starts every sealed record. Its NUL cannot start a JSON text, so a
// record stored in clear before encryption was configured is told apart.
var magic = []byte("\x00acsp1")

const (
	nonceSize   = 12
	tagSize     = 16
	wrappedSize = KeySize + tagSize
	headerSize  = 6 + nonceSize + wrappedSize + nonceSize
)

// ErrOpen is matched by the error of Open for a record that does not
// decrypt: the wrong master key, a record moved to another step, or one
// edited.
var ErrOpen = errors.New("request params do not decrypt")

// ErrNoKey is matched by the error of Open for a sealed record when no
// master key is configured.
var ErrNoKey = errors.New("request params are encrypted and no master key is configured")

// A Sealer seals and opens params records with one master key.
type Sealer struct {
	master cipher.AEAD
}

// New returns a Sealer over a 32-byte master key.
func New(master []byte) (*Sealer, error) {
	if len(master) != KeySize {
		return nil, fmt.Errorf("master key: %d bytes, want %d", len(master), KeySize)
	}
	aead, err := gcm(master)
	if err != nil {
		return nil, err
	}
	return &Sealer{master: aead}, nil
}

func gcm(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("couldn't make an AES key: %w", err)
	}
	return cipher.NewGCM(b)
}

// additionalData binds a record to its step: a label naming what is
// sealed (the data key or the params), the session id with its length,
// and the position.
func additionalData(label, sessionID string, position int64) []byte {
	b := make([]byte, 0, len(label)+len(sessionID)+16)
	b = append(b, label...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(sessionID)))
	b = append(b, sessionID...)
	return binary.BigEndian.AppendUint64(b, uint64(position))
}

// Seal encrypts the params of the step at position of sessionID under a
// fresh data key. The record is magic, the nonce and wrapped data key,
// then the nonce and ciphertext of the params.
func (s *Sealer) Seal(sessionID string, position int64, params []byte) ([]byte, error) {
	return s.seal(paramsLabels, sessionID, position, params)
}

// labels name what a record seals, in its additional data: a params
// record and a source record of the same step are sealed apart, so one
// moved into the other's table does not open.
type labels struct{ key, data, what string }

var (
	paramsLabels = labels{"acsledger params data key v1", "acsledger params v1", "params"}
	sourceLabels = labels{"acsledger source data key v1", "acsledger source v1", "source record"}
)

// SealSource encrypts the exact source bytes of the record an ingested
// entry at position of sessionID was made from, as Seal encrypts params
// (ledger.SourceSealer). Erasing the record deletes its data key with it.
func (s *Sealer) SealSource(sessionID string, position int64, src []byte) ([]byte, error) {
	return s.seal(sourceLabels, sessionID, position, src)
}

// OpenSource decrypts a record SealSource made for the same entry. A
// record that is not sealed (stored before a master key was configured)
// is returned as it is: source bytes in clear can start with any byte but
// NUL, which magic starts with.
func (s *Sealer) OpenSource(sessionID string, position int64, record []byte) ([]byte, error) {
	if !Sealed(record) {
		return record, nil
	}
	return s.open(sourceLabels, sessionID, position, record)
}

func (s *Sealer) seal(l labels, sessionID string, position int64, params []byte) ([]byte, error) {
	dek := make([]byte, KeySize)
	out := make([]byte, 0, headerSize+len(params)+tagSize)
	out = append(out, magic...)
	wrapNonce := make([]byte, nonceSize)
	nonce := make([]byte, nonceSize)
	for _, b := range [][]byte{dek, wrapNonce, nonce} {
		if _, err := rand.Read(b); err != nil {
			return nil, fmt.Errorf("couldn't draw a random key or nonce: %w", err)
		}
	}
	out = append(out, wrapNonce...)
	out = s.master.Seal(out, wrapNonce, dek, additionalData(l.key, sessionID, position))
	data, err := gcm(dek)
	if err != nil {
		return nil, err
	}
	out = append(out, nonce...)
	return data.Seal(out, nonce, params, additionalData(l.data, sessionID, position)), nil
}

// Sealed reports whether a stored record is sealed (and not params stored
// in clear).
func Sealed(record []byte) bool { return bytes.HasPrefix(record, magic) }

// Open decrypts a record Seal made for the same step. Params stored in
// clear before encryption was configured (a JSON object) are returned as
// they are; anything else that is not sealed is ErrOpen. s may be nil (no
// master key): a sealed record is then ErrNoKey.
func (s *Sealer) Open(sessionID string, position int64, record []byte) ([]byte, error) {
	if !Sealed(record) {
		if len(record) > 0 && record[0] == '{' {
			return record, nil
		}
		return nil, fmt.Errorf("%w: the record of session %q position %d is neither sealed nor params in clear", ErrOpen, sessionID, position)
	}
	return s.open(paramsLabels, sessionID, position, record)
}

func (s *Sealer) open(l labels, sessionID string, position int64, record []byte) ([]byte, error) {
	if s == nil {
		return nil, ErrNoKey
	}
	if len(record) < headerSize+tagSize {
		return nil, fmt.Errorf("%w: the record is %d bytes, shorter than its header", ErrOpen, len(record))
	}
	rest := record[len(magic):]
	wrapNonce, wrapped, nonce, ct := rest[:nonceSize], rest[nonceSize:nonceSize+wrappedSize], rest[nonceSize+wrappedSize:nonceSize+wrappedSize+nonceSize], rest[nonceSize+wrappedSize+nonceSize:]
	dek, err := s.master.Open(nil, wrapNonce, wrapped, additionalData(l.key, sessionID, position))
	if err != nil {
		return nil, fmt.Errorf("%w: the data key does not unwrap for session %q position %d (another master key, or a record of another step)", ErrOpen, sessionID, position)
	}
	data, err := gcm(dek)
	if err != nil {
		return nil, err
	}
	params, err := data.Open(nil, nonce, ct, additionalData(l.data, sessionID, position))
	if err != nil {
		return nil, fmt.Errorf("%w: the %s of session %q position %d do not authenticate", ErrOpen, l.what, sessionID, position)
	}
	return params, nil
}

// ParseKey reads a master key written as 64 hex digits, surrounding
// white space allowed.
func ParseKey(text string) ([]byte, error) {
	k, err := hex.DecodeString(strings.TrimSpace(text))
	if err != nil || len(k) != KeySize {
		return nil, fmt.Errorf("a master key is %d hex digits", 2*KeySize)
	}
	return k, nil
}

// GenerateKeyFile writes a new random master key to path, readable by its
// owner only; it fails if path exists.
func GenerateKeyFile(path string) ([]byte, error) {
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("couldn't draw a master key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("couldn't create the master key file: %w", err)
	}
	if _, err := fmt.Fprintf(f, "%x\n", k); err != nil {
		f.Close()
		return nil, fmt.Errorf("couldn't write the master key file: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("couldn't write the master key file: %w", err)
	}
	return k, nil
}
