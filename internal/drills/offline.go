//go:build drills

package drills

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// BuildVerifier compiles the offline verifier `acsverify` into dir and
// returns its path: the binary an auditor runs, with no database driver
// and no network.
func BuildVerifier(dir string) (string, error) {
	return build(dir, "acsverify")
}

// Auditor checks a ledger's evidence offline with `acsverify bundle`, with
// keys it was handed apart from the evidence: the public response keys of
// the key directory, the log's verifier keys as `acsledger log-key` prints
// them, and the HMAC-SHA256 key's IKM (the Guardian signs the answers of
// an HMAC session with the session's derived key, ACS §10).
type Auditor struct {
	// Verifier is the acsverify binary; Ledger the acsledger binary that
	// exports the bundles.
	Verifier, Ledger string
	// Trust is the trust file (acsverify bundle --trust), HMACIKM the
	// --hmac-ikm KEY_ID=HEX value.
	Trust, HMACIKM string
}

// NewAuditor writes the trust file of the key directory keys into a
// temporary directory.
func NewAuditor(t testing.TB, verifier, ledger, keys string) *Auditor {
	t.Helper()
	a := &Auditor{Verifier: verifier, Ledger: ledger, Trust: filepath.Join(t.TempDir(), "trust.json")}
	var trust struct {
		ResponseKeys []json.RawMessage `json:"response_keys"`
		LogKeys      []string          `json:"log_keys"`
	}
	pubs, err := filepath.Glob(filepath.Join(keys, "*.pub.json"))
	if err != nil || len(pubs) == 0 {
		t.Fatalf("no public response key in %s: %v", keys, err)
	}
	for _, p := range pubs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		trust.ResponseKeys = append(trust.ResponseKeys, b)
	}
	for line := range strings.Lines(Run(t, ledger, "log-key", "--keys", keys)) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "origin: ") {
			trust.LogKeys = append(trust.LogKeys, line)
		}
	}
	if len(trust.LogKeys) == 0 {
		t.Fatalf("acsledger log-key printed no verifier key for %s", keys)
	}
	b, err := json.Marshal(trust)
	if err == nil {
		err = os.WriteFile(a.Trust, b, 0o600)
	}
	if err != nil {
		t.Fatal(err)
	}
	privs, _ := filepath.Glob(filepath.Join(keys, "*.key.json"))
	for _, p := range privs {
		var k struct {
			KeyID     string `json:"key_id"`
			Algorithm string `json:"algorithm"`
			Private   string `json:"private"`
		}
		b, err := os.ReadFile(p)
		if err == nil {
			err = json.Unmarshal(b, &k)
		}
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if k.Algorithm != "HMAC-SHA256" {
			continue
		}
		ikm, err := base64.StdEncoding.DecodeString(k.Private)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		a.HMACIKM = k.KeyID + "=" + hex.EncodeToString(ikm)
	}
	if a.HMACIKM == "" {
		t.Fatalf("no HMAC-SHA256 key in %s", keys)
	}
	return a
}

// Offline is what an auditor found checking every session of a ledger
// offline.
type Offline struct {
	// Sessions were exported and Verified of them verified; Entries is
	// the sum of the entries the verified bundles hold.
	Sessions, Verified int
	Entries            int64
	// Since is the tree size of the checkpoint held before the backup,
	// which every bundle carries with a consistency proof to TreeSize,
	// the size of the restored log's latest checkpoint.
	Since, TreeSize uint64
	// Extended counts the sessions acsverify found to extend the bundle
	// exported before the backup (--since).
	Extended int
	// Bundles maps each session to its exported bundle.
	Bundles map[string]string
}

func (o Offline) String() string {
	s := fmt.Sprintf("acsverify: %d of %d sessions verified, %d entries, checkpoint %d consistent with the one of size %d held before the backup",
		o.Verified, o.Sessions, o.Entries, o.TreeSize, o.Since)
	if o.Extended > 0 {
		s += fmt.Sprintf(", %d sessions extending their bundle exported before it", o.Extended)
	}
	return s
}

// Export writes the evidence bundle of session from the store db to path
// with `acsledger export` (sinceSize 0 for none): the command reads the
// store directly, so the export is not in the access log.
func (a *Auditor) Export(t testing.TB, db, keys, session string, sinceSize uint64, path string) {
	t.Helper()
	Run(t, a.Ledger, "export", "--db", db, "--keys", keys, "--session", session,
		"--since-size", strconv.FormatUint(sinceSize, 10), "--out", path)
}

// Sessions lists every session of the server's ledger through GET
// /api/v1/sessions: the list leaves the access log's days out, so they are
// asked for by its agent id (docs/security.md, "The access log").
func (s *Server) Sessions(t testing.TB) []string {
	t.Helper()
	var ids []string
	for _, filter := range []string{"", "&agent_id=acsledger-access"} {
		cursor := ""
		for {
			path := "/api/v1/sessions?limit=1000" + filter
			if cursor != "" {
				path += "&cursor=" + url.QueryEscape(cursor)
			}
			code, body := s.Do(t, http.MethodGet, path, nil)
			var page struct {
				Sessions []struct {
					SessionID string `json:"session_id"`
				} `json:"sessions"`
				Next string `json:"next"`
			}
			if err := json.Unmarshal(body, &page); code != http.StatusOK || err != nil {
				t.Fatalf("GET %s: %d %v %s", path, code, err, body)
			}
			for _, p := range page.Sessions {
				ids = append(ids, p.SessionID)
			}
			if page.Next == "" {
				break
			}
			cursor = page.Next
		}
	}
	return ids
}

// VerifyLedger exports the evidence bundle of each of sessions (all of
// a ledger's, Server.Sessions) from the store db (`acsledger export --since-size`, the
// size of before) into a temporary directory and checks each with
// `acsverify bundle`: chain, signed heads, the log's signature on its
// checkpoints, the inclusion of every entry and the consistency of the
// latest checkpoint with the one of before's size. before is a checkpoint
// body (origin, size and root hash) an auditor held before the backup; the
// checkpoint of its size every bundle carries must be it. VerifyLedger
// fails t if a bundle does not verify or carries another checkpoint. The
// log must have anchored every entry (Server.WaitAnchored): an entry it
// has not is not_anchored. A session with a bundle in earlier, exported
// before the backup, is checked with `acsverify bundle --since` that
// bundle: the restored chain must hold the earlier one whole, and the
// restored log extend its checkpoint.
func (a *Auditor) VerifyLedger(t testing.TB, sessions []string, db, keys, before string, earlier map[string]string) Offline {
	t.Helper()
	beforeSize := checkpointSize(t, before)
	o := Offline{Since: beforeSize, Bundles: map[string]string{}}
	dir := t.TempDir()
	for i, id := range sessions {
		path := filepath.Join(dir, fmt.Sprintf("session-%d.json", i))
		a.Export(t, db, keys, id, beforeSize, path)
		o.Sessions++
		o.Bundles[id] = path
		args := []string{"bundle", "--json", "--trust", a.Trust, "--hmac-ikm", a.HMACIKM}
		if e, ok := earlier[id]; ok {
			args = append(args, "--since", e)
		}
		out, err := exec.Command(a.Verifier, append(args, path)...).Output()
		var rep struct {
			Verified bool              `json:"verified"`
			Entries  int64             `json:"entries"`
			Findings []json.RawMessage `json:"findings"`
			Notices  []json.RawMessage `json:"notices"`
		}
		if jerr := json.Unmarshal(out, &rep); jerr != nil || err != nil || !rep.Verified || len(rep.Notices) > 0 {
			t.Errorf("acsverify bundle of session %s (%s): %v %v\n%s", id, path, err, jerr, out)
			continue
		}
		cps := bundleCheckpoints(t, path)
		var held, latest string
		for _, cp := range cps {
			head, _, _ := strings.Cut(cp, "\n\n")
			if checkpointSize(t, head) == beforeSize {
				held = head
			}
			latest = head
		}
		if held != before {
			t.Errorf("the bundle of session %s carries the checkpoint of size %d\n%s\nthe auditor held\n%s", id, beforeSize, held, before)
			continue
		}
		if size := checkpointSize(t, latest); o.TreeSize == 0 || size > o.TreeSize {
			o.TreeSize = size
		}
		o.Verified++
		o.Entries += rep.Entries
		if _, ok := earlier[id]; ok {
			o.Extended++
		}
	}
	return o
}

// CheckTamper copies bundle, changes one hexadecimal digit of the
// request_hash of its middle entry (a byte of the hashed content:
// the JSON stays valid and the entry's stated entry_hash no longer holds),
// and checks that acsverify rejects the copy with exit status 1 and names
// the entry. It returns the entry's position and the finding's line.
func (a *Auditor) CheckTamper(t testing.TB, bundle string) (position int, finding string) {
	t.Helper()
	b, err := os.ReadFile(bundle)
	if err != nil {
		t.Fatal(err)
	}
	var parsed struct {
		Steps []struct {
			Entry json.RawMessage `json:"entry"`
		} `json:"steps"`
	}
	if err := json.Unmarshal(b, &parsed); err != nil || len(parsed.Steps) == 0 {
		t.Fatalf("%s: %v, %d steps", bundle, err, len(parsed.Steps))
	}
	position = len(parsed.Steps) / 2
	entry := parsed.Steps[position].Entry
	var id struct {
		EntryID string `json:"entry_id"`
	}
	if err := json.Unmarshal(entry, &id); err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(b, entry)
	field := bytes.Index(entry, []byte(`"request_hash":"`))
	if at < 0 || field < 0 || bytes.Count(b, entry) != 1 {
		t.Fatalf("%s: no single entry at position %d with a request_hash", bundle, position)
	}
	i := at + field + len(`"request_hash":"`)
	tampered := bytes.Clone(b)
	if tampered[i] == '0' {
		tampered[i] = '1'
	} else {
		tampered[i] = '0'
	}
	path := filepath.Join(t.TempDir(), "tampered.json")
	if err := os.WriteFile(path, tampered, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(a.Verifier, "bundle", "--trust", a.Trust, "--hmac-ikm", a.HMACIKM, path).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("acsverify bundle of a copy with byte %d changed (%q to %q): %v, want exit status 1\n%s", i, b[i], tampered[i], err, out)
	}
	names := fmt.Sprintf("entry %d (entry_id %q", position, id.EntryID)
	for line := range strings.Lines(string(out)) {
		if strings.Contains(line, names) && strings.Contains(line, "entry_hash_mismatch") {
			return position, strings.TrimSpace(line)
		}
	}
	t.Fatalf("acsverify rejected a copy with byte %d changed but named no entry_hash_mismatch at %s:\n%s", i, names, out)
	return position, ""
}

// CheckNotExtending checks that acsverify rejects bundle as the later
// bundle of the session of earlier (`acsverify bundle --since earlier`)
// with exit status 1 and a finding of each of codes, as when a ledger was
// restored from a backup older than a bundle an auditor holds. It returns
// the codes of the findings.
func (a *Auditor) CheckNotExtending(t testing.TB, bundle, earlier string, codes ...string) []string {
	t.Helper()
	out, err := exec.Command(a.Verifier, "bundle", "--json", "--trust", a.Trust, "--hmac-ikm", a.HMACIKM, "--since", earlier, bundle).Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("acsverify bundle --since %s %s: %v, want exit status 1\n%s", earlier, bundle, err, out)
	}
	var rep struct {
		Findings []struct {
			Code string `json:"code"`
		} `json:"findings"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("acsverify bundle --json: %v\n%s", err, out)
	}
	var got []string
	for _, f := range rep.Findings {
		got = append(got, f.Code)
	}
	for _, c := range codes {
		if !slices.Contains(got, c) {
			t.Errorf("acsverify bundle --since %s %s: findings %v, want %s among them", earlier, bundle, got, c)
		}
	}
	return got
}

// bundleCheckpoints returns the checkpoints a bundle carries.
func bundleCheckpoints(t testing.TB, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var bundle struct {
		Checkpoints []string `json:"checkpoints"`
	}
	if err := json.Unmarshal(b, &bundle); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return bundle.Checkpoints
}

// checkpointSize is the tree size of a checkpoint (its second line). The
// checkpoints compared here are not always whole notes (one held before a
// backup may come without its final newline), so only the size line is
// read.
func checkpointSize(t testing.TB, cp string) uint64 {
	t.Helper()
	lines := strings.SplitN(cp, "\n", 3)
	if len(lines) < 2 {
		t.Fatalf("not a checkpoint: %q", cp)
	}
	n, err := strconv.ParseUint(lines[1], 10, 64)
	if err != nil {
		t.Fatalf("checkpoint size %q: %v", lines[1], err)
	}
	return n
}
