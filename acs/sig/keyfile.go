package sig

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Key files (docs/signatures.md). One JSON object per file:
//
//	<key_id>.key.json  {"key_id", "algorithm", "public", "private"}  mode 0600
//	<key_id>.pub.json  {"key_id", "algorithm", "public"}
//
// "public" and "private" are standard base64 of the encodings listed in
// schemes.go. HMAC-SHA256 keys have only a .key.json file, whose "private"
// is the IKM and which has no "public".
const (
	privateSuffix = ".key.json"
	publicSuffix  = ".pub.json"
)

// fileKeyID restricts the key_ids of keys written to files, since the key_id
// is also the file name.
var fileKeyID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

type keyFile struct {
	KeyID     string `json:"key_id"`
	Algorithm string `json:"algorithm"`
	Public    string `json:"public,omitempty"`
	Private   string `json:"private,omitempty"`
}

// MarshalPrivate returns the .key.json form of k.
func (k *PrivateKey) MarshalPrivate() ([]byte, error) {
	f := keyFile{KeyID: k.keyID, Algorithm: string(k.alg)}
	if k.alg == HMACSHA256 {
		f.Private = base64.StdEncoding.EncodeToString(k.ikm)
	} else {
		priv, err := k.priv.marshal()
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", k.keyID, err)
		}
		pub, err := k.priv.public().marshal()
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", k.keyID, err)
		}
		f.Private = base64.StdEncoding.EncodeToString(priv)
		f.Public = base64.StdEncoding.EncodeToString(pub)
	}
	return json.MarshalIndent(f, "", "  ")
}

// MarshalPublic returns the .pub.json form of k. HMAC-SHA256 keys have no
// public form.
func (k *PublicKey) MarshalPublic() ([]byte, error) {
	if k.alg == HMACSHA256 {
		return nil, fmt.Errorf("key %q: HMAC-SHA256 keys are secret and have no public form", k.keyID)
	}
	pub, err := k.pub.marshal()
	if err != nil {
		return nil, fmt.Errorf("key %q: %w", k.keyID, err)
	}
	return json.MarshalIndent(keyFile{KeyID: k.keyID, Algorithm: string(k.alg), Public: base64.StdEncoding.EncodeToString(pub)}, "", "  ")
}

// ParsePrivateKey reads a .key.json document. When it carries "public",
// that must be the public half of "private".
func ParsePrivateKey(b []byte) (*PrivateKey, error) {
	f, alg, err := parseKeyFile(b)
	if err != nil {
		return nil, err
	}
	if f.Private == "" {
		return nil, fmt.Errorf("key %q: no \"private\" member", f.KeyID)
	}
	priv, err := decodeB64(f.KeyID, "private", f.Private)
	if err != nil {
		return nil, err
	}
	if alg == HMACSHA256 {
		if f.Public != "" {
			return nil, fmt.Errorf("key %q: an HMAC-SHA256 key has no \"public\" member", f.KeyID)
		}
		return NewHMACKey(f.KeyID, priv)
	}
	m, err := parsePrivate(alg, priv)
	if err != nil {
		return nil, fmt.Errorf("key %q: %w", f.KeyID, err)
	}
	k := &PrivateKey{keyID: f.KeyID, alg: alg, priv: m}
	if f.Public != "" {
		pub, err := decodeB64(f.KeyID, "public", f.Public)
		if err != nil {
			return nil, err
		}
		derived, err := m.public().marshal()
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", f.KeyID, err)
		}
		if !bytes.Equal(pub, derived) {
			return nil, fmt.Errorf("key %q: \"public\" is not the public half of \"private\"", f.KeyID)
		}
	}
	return k, nil
}

// ParsePublicKey reads a .pub.json document.
func ParsePublicKey(b []byte) (*PublicKey, error) {
	f, alg, err := parseKeyFile(b)
	if err != nil {
		return nil, err
	}
	if f.Private != "" {
		return nil, fmt.Errorf("key %q: a public key file must not hold \"private\"", f.KeyID)
	}
	if alg == HMACSHA256 {
		return nil, fmt.Errorf("key %q: HMAC-SHA256 keys have no public key file", f.KeyID)
	}
	if f.Public == "" {
		return nil, fmt.Errorf("key %q: no \"public\" member", f.KeyID)
	}
	pub, err := decodeB64(f.KeyID, "public", f.Public)
	if err != nil {
		return nil, err
	}
	m, err := parsePublic(alg, pub)
	if err != nil {
		return nil, fmt.Errorf("key %q: %w", f.KeyID, err)
	}
	return &PublicKey{keyID: f.KeyID, alg: alg, pub: m}, nil
}

func parseKeyFile(b []byte) (*keyFile, Algorithm, error) {
	var f keyFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, "", fmt.Errorf("key file: %w", err)
	}
	if dec.More() {
		return nil, "", errors.New("key file: data after the JSON object")
	}
	if f.KeyID == "" {
		return nil, "", errors.New("key file: empty or missing \"key_id\"")
	}
	alg, err := ParseAlgorithm(f.Algorithm)
	if err != nil {
		return nil, "", fmt.Errorf("key %q: %w", f.KeyID, err)
	}
	return &f, alg, nil
}

func decodeB64(keyID, member, s string) ([]byte, error) {
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("key %q: %q is not standard base64: %w", keyID, member, err)
	}
	return b, nil
}

// KeyDir is what LoadKeyDir found: the signing keys of the .key.json files
// and a key set with every key's verifying half (.pub.json files and the
// public halves of the private keys, HMAC IKMs included).
type KeyDir struct {
	Private []*PrivateKey
	KeySet  *KeySet
}

// LoadKeyDir reads every *.key.json and *.pub.json file in dir (other files
// are ignored). A key_id named by two files must name the same key.
func LoadKeyDir(dir string) (*KeyDir, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("couldn't read key directory: %w", err)
	}
	kd := &KeyDir{KeySet: &KeySet{}}
	seen := map[string]string{} // key_id -> file that named it as private
	for _, e := range entries {
		name := e.Name()
		isPriv, isPub := strings.HasSuffix(name, privateSuffix), strings.HasSuffix(name, publicSuffix)
		if e.IsDir() || (!isPriv && !isPub) {
			continue
		}
		path := filepath.Join(dir, name)
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("couldn't read key file: %w", err)
		}
		var pub *PublicKey
		if isPriv {
			k, err := ParsePrivateKey(b)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			if other, dup := seen[k.keyID]; dup {
				return nil, fmt.Errorf("%s: key_id %q is also the private key in %s", path, k.keyID, other)
			}
			seen[k.keyID] = path
			kd.Private = append(kd.Private, k)
			pub = k.Public()
		} else {
			if pub, err = ParsePublicKey(b); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
		}
		if err := kd.KeySet.Add(pub); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	sort.Slice(kd.Private, func(i, j int) bool { return kd.Private[i].keyID < kd.Private[j].keyID })
	return kd, nil
}

// WriteKeyDir writes each key's .key.json (mode 0600) and, except for
// HMAC-SHA256 keys, its .pub.json (mode 0644) into dir, creating dir (mode
// 0700) if needed. It never overwrites a file: if any target exists it
// writes nothing, and if writing fails midway it removes what it wrote.
func WriteKeyDir(dir string, keys ...*PrivateKey) error {
	type target struct {
		path string
		data []byte
		mode os.FileMode
	}
	var targets []target
	for _, k := range keys {
		if !fileKeyID.MatchString(k.keyID) {
			return fmt.Errorf("key_id %q cannot be a file name: use letters, digits, '.', '_' and '-', at most 128, not starting with '.', '_' or '-'", k.keyID)
		}
		priv, err := k.MarshalPrivate()
		if err != nil {
			return err
		}
		targets = append(targets, target{filepath.Join(dir, k.keyID+privateSuffix), append(priv, '\n'), 0o600})
		if k.alg != HMACSHA256 {
			pub, err := k.Public().MarshalPublic()
			if err != nil {
				return err
			}
			targets = append(targets, target{filepath.Join(dir, k.keyID+publicSuffix), append(pub, '\n'), 0o644})
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("couldn't create key directory: %w", err)
	}
	for _, t := range targets {
		if _, err := os.Lstat(t.path); err == nil {
			return fmt.Errorf("couldn't write keys: %s already exists", t.path)
		}
	}
	var written []string
	for _, t := range targets {
		if err := writeNew(t.path, t.data, t.mode); err != nil {
			for _, p := range written {
				os.Remove(p)
			}
			return fmt.Errorf("couldn't write keys: %w", err)
		}
		written = append(written, t.path)
	}
	return nil
}

// writeNew writes a file that must not exist yet, durably: a temporary file
// in the same directory, synced, then hard-linked to its name (which fails
// if the name appeared meanwhile).
func writeNew(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-key-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Link(tmp.Name(), path)
}

// ParseHMACKeyFlag parses the value of --hmac-key, KEY_ID=HEX_IKM, into an
// HMAC-SHA256 key. The IKM is hex (either case), at least MinHMACKeySize
// bytes.
func ParseHMACKeyFlag(s string) (*PrivateKey, error) {
	id, hx, ok := strings.Cut(s, "=")
	if !ok {
		return nil, fmt.Errorf("--hmac-key %q: want KEY_ID=HEX_IKM", redact(s))
	}
	if id == "" {
		return nil, errors.New("--hmac-key: empty KEY_ID before '='")
	}
	ikm, err := hex.DecodeString(hx)
	if err != nil {
		return nil, fmt.Errorf("--hmac-key %s=...: IKM is not hex: %w", id, err)
	}
	return NewHMACKey(id, ikm)
}

// redact keeps a secret out of error messages: only what precedes '='.
func redact(s string) string {
	if i := strings.IndexByte(s, '='); i >= 0 {
		return s[:i] + "=..."
	}
	if len(s) > 8 {
		return s[:4] + "..."
	}
	return s
}
