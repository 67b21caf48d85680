package tlog

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"

	"github.com/acsledger/acsledger/verify"
)

// WitnessPolicy is a witness policy in the Sigsum policy file format (the
// format Tessera and the witness network use): the witnesses a log asks,
// groups of them with thresholds, and the quorum a checkpoint's
// cosignatures must satisfy before the log publishes it. The parser is our
// own, written from the format's public description
// (sigsum-go doc/policy.md):
//
//	# comment to the end of the line
//	log <key> [<url>]
//	witness <name> <key> [<url>]
//	group <name> all|any|<k> <name>...
//	quorum <name>|none
//
// A key is a signed-note verifier key (<name>+<id>+<base64>, type 0x04
// Ed25519 cosignature/v1 or 0x06 ML-DSA-44, what `acsledger witness`
// prints) or, as Sigsum writes them, a raw Ed25519 public key in 64 hex
// digits, taken as a cosignature/v1 key whose signed-note name is the
// witness's name. Names are defined before they are used; witnesses and
// groups share one namespace; `none` is predefined and needs nothing.
type WitnessPolicy struct {
	// Logs are the log keys the policy names (signed-note verifier keys,
	// or 64 hex digits), for checking that it is this log's.
	Logs []string
	// Witnesses in the order of the file.
	Witnesses []PolicyWitness
	quorum    *policyNode
}

// PolicyWitness is one witness line.
type PolicyWitness struct {
	Name string
	// VerifierKey is the witness's cosignature key as a signed-note
	// verifier key.
	VerifierKey string
	// URL is where its tlog-witness add-checkpoint endpoint lives ("" if
	// the line gives none).
	URL string
	v   note.Verifier
}

// policyNode is a witness (w >= 0) or a group of k of its members.
type policyNode struct {
	w       int // index in Witnesses, or -1 for a group
	k       int
	members []*policyNode
}

// satisfied reports whether the witnesses in cosigned satisfy n.
func (n *policyNode) satisfied(cosigned map[int]bool) bool {
	if n.w >= 0 {
		return cosigned[n.w]
	}
	got := 0
	for _, m := range n.members {
		if m.satisfied(cosigned) {
			got++
		}
	}
	return got >= n.k
}

// PolicyError is a witness policy that does not parse: the 1-based line
// and field (0: the whole line) and what is wrong.
type PolicyError struct {
	Line, Field int
	Err         error
}

func (e *PolicyError) Error() string {
	if e.Field > 0 {
		return fmt.Sprintf("witness policy line %d, field %d: %v", e.Line, e.Field, e.Err)
	}
	return fmt.Sprintf("witness policy line %d: %v", e.Line, e.Err)
}

func (e *PolicyError) Unwrap() error { return e.Err }

// ParseWitnessPolicy reads a witness policy. Every error is a
// *PolicyError naming the line and field.
func ParseWitnessPolicy(b []byte) (*WitnessPolicy, error) {
	p := &WitnessPolicy{}
	names := map[string]*policyNode{}
	haveQuorum := false
	lines := strings.Split(string(b), "\n")
	for i, line := range lines {
		ln := i + 1
		fail := func(field int, format string, args ...any) (*WitnessPolicy, error) {
			return nil, &PolicyError{Line: ln, Field: field, Err: fmt.Errorf(format, args...)}
		}
		if c := strings.IndexByte(line, '#'); c >= 0 {
			line = line[:c]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		defineName := func(field int) error {
			name := f[field-1]
			if name == "none" {
				return &PolicyError{Line: ln, Field: field, Err: errors.New(`"none" is predefined and cannot be redefined`)}
			}
			if _, dup := names[name]; dup {
				return &PolicyError{Line: ln, Field: field, Err: fmt.Errorf("name %q is already defined", name)}
			}
			return nil
		}
		switch f[0] {
		case "log":
			if len(f) < 2 || len(f) > 3 {
				return fail(0, "want \"log <key> [<url>]\", got %d fields", len(f))
			}
			if _, err := policyKey("log", f[1]); err != nil {
				return fail(2, "log key: %v", err)
			}
			if len(f) == 3 {
				if err := checkPolicyURL(f[2]); err != nil {
					return fail(3, "log URL: %v", err)
				}
			}
			p.Logs = append(p.Logs, f[1])
		case "witness":
			if len(f) < 3 || len(f) > 4 {
				return fail(0, "want \"witness <name> <key> [<url>]\", got %d fields", len(f))
			}
			if err := defineName(2); err != nil {
				return nil, err
			}
			vkey, err := policyKey(f[1], f[2])
			if err != nil {
				return fail(3, "witness key: %v", err)
			}
			v, err := verify.NoteVerifier(vkey)
			if err != nil {
				return fail(3, "witness key: %v", err)
			}
			if t := keyType(vkey); t != sigTypeCosignatureEd25519 && t != sigTypeCosignatureMLDSA44 {
				return fail(3, "witness key is of type 0x%02x, want a cosignature key (0x04 or 0x06)", t)
			}
			w := PolicyWitness{Name: f[1], VerifierKey: vkey, v: v}
			if len(f) == 4 {
				if err := checkPolicyURL(f[3]); err != nil {
					return fail(4, "witness URL: %v", err)
				}
				w.URL = f[3]
			}
			for _, o := range p.Witnesses {
				if o.v.Name() == v.Name() && o.v.KeyHash() == v.KeyHash() {
					return fail(3, "witness %q has the same key as witness %q", w.Name, o.Name)
				}
			}
			names[w.Name] = &policyNode{w: len(p.Witnesses)}
			p.Witnesses = append(p.Witnesses, w)
		case "group":
			if len(f) < 4 {
				return fail(0, "want \"group <name> all|any|<k> <name>...\", got %d fields", len(f))
			}
			if err := defineName(2); err != nil {
				return nil, err
			}
			g := &policyNode{w: -1}
			seen := map[string]bool{}
			for j, m := range f[3:] {
				n, ok := names[m]
				switch {
				case m == "none":
					return fail(4+j, `"none" cannot be a group member`)
				case !ok:
					return fail(4+j, "member %q is not defined on an earlier line", m)
				case seen[m]:
					return fail(4+j, "member %q is listed twice", m)
				}
				seen[m] = true
				g.members = append(g.members, n)
			}
			switch f[2] {
			case "all":
				g.k = len(g.members)
			case "any":
				g.k = 1
			default:
				k, err := strconv.Atoi(f[2])
				if err != nil || k < 1 || k > len(g.members) || f[2] != strconv.Itoa(k) {
					return fail(3, "threshold %q: want all, any or a number from 1 to %d (the members listed)", f[2], len(g.members))
				}
				g.k = k
			}
			names[f[1]] = g
		case "quorum":
			if len(f) != 2 {
				return fail(0, "want \"quorum <name>\", got %d fields", len(f))
			}
			if haveQuorum {
				return fail(1, "a second quorum line: a policy has exactly one")
			}
			haveQuorum = true
			if f[1] == "none" {
				continue // p.quorum nil: no cosignature is needed
			}
			n, ok := names[f[1]]
			if !ok {
				return fail(2, "quorum %q is not defined on an earlier line", f[1])
			}
			p.quorum = n
		default:
			return fail(1, "unknown keyword %q: want log, witness, group or quorum", f[0])
		}
	}
	if !haveQuorum {
		return nil, &PolicyError{Line: len(lines), Err: errors.New("no quorum line: a policy has exactly one (\"quorum none\" needs no cosignature)")}
	}
	return p, nil
}

// policyKey returns a policy key as a signed-note verifier key: as it is,
// or for 64 hex digits an Ed25519 cosignature/v1 key named name.
func policyKey(name, key string) (string, error) {
	// A verifier key always holds '+'; a raw key never does (and a
	// verifier key can itself be 64 characters long).
	if !strings.Contains(key, "+") {
		if len(key) != 64 {
			return "", fmt.Errorf("neither 64 hex digits (%d characters) nor a signed-note verifier key", len(key))
		}
		pub, err := hex.DecodeString(key)
		if err != nil || strings.ToLower(key) != key {
			return "", errors.New("64 characters but not lowercase hex")
		}
		if !validKeyName(name) {
			return "", fmt.Errorf("name %q cannot name a signed-note key", name)
		}
		return fmt.Sprintf("%s+%08x+%s", name, keyID(name, sigTypeCosignatureEd25519, pub),
			base64.StdEncoding.EncodeToString(append([]byte{sigTypeCosignatureEd25519}, pub...))), nil
	}
	if _, _, _, _, err := splitKey(key); err != nil {
		return "", fmt.Errorf("neither 64 hex digits nor a signed-note verifier key: %v", err)
	}
	return key, nil
}

func checkPolicyURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL", s)
	}
	if u.User != nil {
		return errors.New("a URL must not carry user information")
	}
	return nil
}

// Satisfied reports whether the cosignature lines (as stored for a
// checkpoint, or appended to a note) satisfy the policy's quorum for the
// signed checkpoint note. A line that does not verify under its
// witness's key counts for nothing.
func (p *WitnessPolicy) Satisfied(signed []byte, lines [][]byte) bool {
	if p.quorum == nil {
		return true
	}
	return p.quorum.satisfied(p.cosigned(signed, lines))
}

// cosigned returns the indexes of the witnesses with a valid cosignature
// among lines. Each line is checked on its own, so a bad or foreign line
// costs only itself.
func (p *WitnessPolicy) cosigned(signed []byte, lines [][]byte) map[int]bool {
	out := map[int]bool{}
	if len(lines) == 0 {
		return out
	}
	vs := make([]note.Verifier, len(p.Witnesses))
	for i, w := range p.Witnesses {
		vs[i] = w.v
	}
	known := note.VerifierList(vs...)
	for _, l := range lines {
		n, err := note.Open(append(bytes.Clone(signed), l...), known)
		if err != nil {
			continue
		}
		for _, s := range n.Sigs {
			for i, w := range p.Witnesses {
				if s.Name == w.v.Name() && s.Hash == w.v.KeyHash() {
					out[i] = true
				}
			}
		}
	}
	return out
}

// NamesLog reports whether the policy's log lines name one of vkeys (the
// log's verifier keys), or name no log at all.
func (p *WitnessPolicy) NamesLog(vkeys []string) bool {
	if len(p.Logs) == 0 {
		return true
	}
	for _, k := range p.Logs {
		for _, v := range vkeys {
			if k == v {
				return true
			}
			if _, typ, pub, _, err := splitKey(v); err == nil && typ == sigTypeEd25519 && k == hex.EncodeToString(pub) {
				return true
			}
		}
	}
	return false
}

// VerifierKeys returns the witnesses' cosignature verifier keys, in the
// order of the file (for a bundle's witness list).
func (p *WitnessPolicy) VerifierKeys() []string {
	out := make([]string, len(p.Witnesses))
	for i, w := range p.Witnesses {
		out[i] = w.VerifierKey
	}
	return out
}

// MinWitnesses is the fewest distinct witnesses whose cosignatures can
// satisfy the quorum (0 for "quorum none"): the k of a k-of-n check, which
// is what an evidence bundle can carry (keys.witness_quorum). It is exact
// for up to 16 witnesses and a lower bound beyond (the largest threshold
// of the quorum's own group), so a bundle check with it never refuses
// what the policy accepts.
func (p *WitnessPolicy) MinWitnesses() int {
	if p.quorum == nil {
		return 0
	}
	n := len(p.Witnesses)
	if n > 16 {
		if p.quorum.w >= 0 {
			return 1
		}
		return p.quorum.k
	}
	best := n
	for set := 0; set < 1<<n; set++ {
		c := 0
		in := map[int]bool{}
		for i := range n {
			if set&(1<<i) != 0 {
				in[i] = true
				c++
			}
		}
		if c < best && p.quorum.satisfied(in) {
			best = c
		}
	}
	return best
}
