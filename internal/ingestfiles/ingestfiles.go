// Package ingestfiles takes in files of records other systems wrote
// (acsledger ingest, docs/ingest.md) through ingest.Runner, and reports
// what became of each record as the command prints it: a line per
// quarantined record or a JSON object per record, a summary, and a
// progress line on a terminal.
package ingestfiles

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/ingest"
	"github.com/acsledger/acsledger/internal/keydir"
	"github.com/acsledger/acsledger/internal/term"
	"github.com/acsledger/acsledger/ledger"
)

// Open opens every file named, or none: a file that does not open closes
// the ones before it, so that nothing is taken in from a run that cannot
// read all its input.
func Open(names []string) ([]*os.File, error) {
	files := make([]*os.File, len(names))
	for i, name := range names {
		f, err := os.Open(name)
		if err != nil {
			Close(files[:i])
			return nil, fmt.Errorf("couldn't read input: %w", err)
		}
		files[i] = f
	}
	return files, nil
}

// Close closes files.
func Close(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// Options say how Run reads and reports.
type Options struct {
	// Format is the records' format: OPA's are JSON arrays, the others
	// JSON Lines.
	Format ingest.Format
	// Batch is the records per transaction.
	Batch int
	// JSON prints one JSON object per record and a summary object;
	// otherwise the quarantined records and a summary line are printed.
	JSON bool
}

// Run takes in the records of files (named names) through m into store,
// one file after the other, and reports each record on stdout as it is
// committed. On stderr, when it is a terminal and the output is not JSON,
// it draws a progress line per file. It returns the total, the errors of
// files found unreadable part way (their records before that are taken
// in), and any other error, which stops it.
func Run(ctx context.Context, store ingest.Store, m ingest.Mapper, names []string, files []*os.File, o Options, stdout, stderr io.Writer) (total ingest.Summary, unreadable []error, err error) {
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	tty, _ := stderr.(*os.File)
	showProgress := !o.JSON && tty != nil && term.Is(tty)
	for i, name := range names {
		var in io.Reader = files[i]
		var bar *progress
		if showProgress {
			bar = newProgress(tty, name, files[i])
			in = bar
		}
		r := ingest.Runner{Store: store, Batch: o.Batch, OnResult: func(rec ledger.IngestRecord, res ledger.IngestResult) {
			if bar != nil {
				bar.record()
			}
			if o.JSON {
				line := recordJSON{File: rec.File, Record: rec.Record, Key: rec.Key, Status: string(res.Status), Detail: res.Detail, Flags: rec.Flags}
				if res.Status == ledger.IngestQuarantined {
					line.Reason = &res.Reason
				} else {
					line.SessionID, line.Position = &res.SessionID, &res.Position
				}
				if line.Flags == nil {
					line.Flags = []string{}
				}
				enc.Encode(line)
				return
			}
			if res.Status == ledger.IngestQuarantined {
				fmt.Fprintf(out, "quarantined %s: %s\n", res.Reason, withPlace(res.Detail, rec))
			}
		}}
		// Each batch's results leave as soon as it committed.
		r.OnBatch = func() { out.Flush() }
		var raws func(func(ingest.Raw) bool)
		if o.Format == ingest.OPA {
			raws = ingest.ArrayElements(in, name)
		} else {
			raws = ingest.Lines(in, name)
		}
		sum, err := r.Run(ctx, m, raws)
		if bar != nil {
			bar.done()
		}
		total.Accepted += sum.Accepted
		total.Duplicate += sum.Duplicate
		total.Quarantined += sum.Quarantined
		if errors.Is(err, ingest.ErrUnreadable) {
			unreadable = append(unreadable, err)
			continue
		}
		if err != nil {
			return total, unreadable, err
		}
	}
	if o.JSON {
		enc.Encode(map[string]ingest.Summary{"summary": total})
	} else {
		fmt.Fprintf(out, "accepted %d, duplicate %d, quarantined %d\n", total.Accepted, total.Duplicate, total.Quarantined)
	}
	return total, unreadable, out.Flush()
}

// Sources are the settings of the formats that need some: where OPA's
// decision events carry the session, the A2H Hubs' keys, replay window
// and message types, and the other Guardian's keys for ACS records.
type Sources struct {
	OPASessionPath string
	// OPASubjectPath maps a member of a decision's input or labels to the
	// entry's subject (ingest.OPAMapper.SubjectPath); "" maps none.
	OPASubjectPath string
	A2HKeys        []ingest.A2HKey
	A2HWindow      time.Duration
	A2HTypes       map[string]string
	ACSKeys        *sig.KeySet
}

// Mapper returns the Mapper of format, refusing a format whose settings
// are missing. store, which the A2H and bash-guard-audit mappers read, may
// be nil to check the flags before a store is opened.
func (f *Sources) Mapper(format string, store ingest.Store) (ingest.Mapper, error) {
	switch ingest.Format(format) {
	case ingest.OPA:
		if f.OPASubjectPath != "" {
			if err := ingest.CheckOPASubjectPath(f.OPASubjectPath); err != nil {
				return nil, fmt.Errorf("--opa-subject-path: %w", err)
			}
		}
		return ingest.OPAMapper{SessionPath: f.OPASessionPath, SubjectPath: f.OPASubjectPath}, nil
	case ingest.BashGuard:
		return ingest.BashGuardMapper{}, nil
	case ingest.BashGuardAudit:
		return ingest.BashGuardAuditMapper{Store: store}, nil
	case ingest.A2H:
		if len(f.A2HKeys) == 0 {
			return nil, errors.New("--format a2h needs at least one --a2h-hmac or --a2h-ed25519 key")
		}
		return ingest.A2HMapper{Verifier: ingest.A2HVerifier{Keys: f.A2HKeys, Window: f.A2HWindow}, Store: store, MessageTypes: f.A2HTypes}, nil
	case ingest.ACS:
		if f.ACSKeys == nil || f.ACSKeys.Len() == 0 {
			return nil, errors.New("--format acs needs the other Guardian's keys (--acs-keys or --acs-hmac)")
		}
		return ingest.ACSMapper{Keys: f.ACSKeys}, nil
	case "":
		return nil, errors.New("--format is required")
	}
	return nil, fmt.Errorf("unknown --format %q (want opa, bash-guard, bash-guard-audit, a2h or acs)", format)
}

// SetOPASubjectPath sets OPASubjectPath, refusing a path
// ingest.CheckOPASubjectPath refuses.
func (f *Sources) SetOPASubjectPath(v string) error {
	if err := ingest.CheckOPASubjectPath(v); err != nil {
		return err
	}
	f.OPASubjectPath = v
	return nil
}

// AddA2HHMAC adds an A2H Hub's HMAC-SHA256 secret, KEY_ID=HEX.
func (f *Sources) AddA2HHMAC(v string) error {
	id, b, err := keyFlag(v)
	if err != nil {
		return err
	}
	f.A2HKeys = append(f.A2HKeys, ingest.A2HKey{ID: id, HMAC: b})
	return nil
}

// AddA2HEd25519 adds an A2H Hub's raw 32-byte Ed25519 public key,
// KEY_ID=HEX.
func (f *Sources) AddA2HEd25519(v string) error {
	id, b, err := keyFlag(v)
	if err != nil {
		return err
	}
	if len(b) != ed25519.PublicKeySize {
		return fmt.Errorf("%s: an Ed25519 public key is %d bytes, not %d", id, ed25519.PublicKeySize, len(b))
	}
	f.A2HKeys = append(f.A2HKeys, ingest.A2HKey{ID: id, Ed25519: ed25519.PublicKey(b)})
	return nil
}

// AddA2HType sets the type of an A2H message, MESSAGE_ID=ask|task|notify.
func (f *Sources) AddA2HType(v string) error {
	id, typ, ok := strings.Cut(v, "=")
	if !ok || id == "" || !slices.Contains([]string{"ask", "task", "notify"}, typ) {
		return fmt.Errorf("want MESSAGE_ID=ask|task|notify, got %q", v)
	}
	if f.A2HTypes == nil {
		f.A2HTypes = map[string]string{}
	}
	f.A2HTypes[id] = typ
	return nil
}

// AddACSKeys adds the other Guardian's response keys: those of a key
// directory, or the one of a .pub.json file.
func (f *Sources) AddACSKeys(path string) error {
	var keys []*sig.PublicKey
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		if keys, err = keydir.PublicKeys(path); err != nil {
			return err
		}
	} else {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		k, err := sig.ParsePublicKey(b)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		keys = append(keys, k)
	}
	return f.addACSKeys(keys...)
}

// AddACSHMAC adds the other Guardian's HMAC-SHA256 IKM, KEY_ID=HEX.
func (f *Sources) AddACSHMAC(v string) error {
	k, err := sig.ParseHMACKeyFlag(v)
	if err != nil {
		return err
	}
	return f.addACSKeys(k.Public())
}

func (f *Sources) addACSKeys(keys ...*sig.PublicKey) error {
	if f.ACSKeys == nil {
		f.ACSKeys = &sig.KeySet{}
	}
	for _, k := range keys {
		if err := f.ACSKeys.Add(k); err != nil {
			return err
		}
	}
	return nil
}

// keyFlag parses KEY_ID=HEX.
func keyFlag(v string) (string, []byte, error) {
	id, hx, ok := strings.Cut(v, "=")
	if !ok || id == "" {
		return "", nil, errors.New("want KEY_ID=HEX")
	}
	b, err := hex.DecodeString(hx)
	if err != nil || len(b) == 0 {
		return "", nil, fmt.Errorf("%s: the key is not hex", id)
	}
	return id, b, nil
}

// recordJSON is one line of the JSON output.
type recordJSON struct {
	File      string   `json:"file"`
	Record    int64    `json:"record"`
	Key       string   `json:"key"`
	Status    string   `json:"status"`
	Reason    *string  `json:"reason"`
	SessionID *string  `json:"session_id"`
	Position  *int64   `json:"position"`
	Flags     []string `json:"flags"`
	Detail    string   `json:"detail,omitempty"`
}

// withPlace prefixes a detail with the record's place unless it has one.
func withPlace(detail string, rec ledger.IngestRecord) string {
	place := fmt.Sprintf("%s:%d: ", rec.File, rec.Record)
	if strings.HasPrefix(detail, place) {
		return detail
	}
	return place + detail
}

// progress draws one line on a terminal: records, records/s, and
// the ETA from the share of the file read.
type progress struct {
	r          io.Reader
	w          io.Writer
	name       string
	size, read int64
	records    atomic.Int64
	start      time.Time
	last       time.Time
	drawn      bool
}

func newProgress(w io.Writer, name string, f *os.File) *progress {
	p := &progress{r: f, w: w, name: name, start: time.Now()}
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		p.size = fi.Size()
	}
	return p
}

func (p *progress) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	atomic.AddInt64(&p.read, int64(n))
	return n, err
}

// record counts one stored record and redraws at most five times a second.
func (p *progress) record() {
	n := p.records.Add(1)
	t := time.Now()
	if t.Sub(p.last) < 200*time.Millisecond {
		return
	}
	p.last = t
	secs := t.Sub(p.start).Seconds()
	rate := float64(n) / max(secs, 1e-3)
	line := fmt.Sprintf("%s: %d records, %.0f records/s", p.name, n, rate)
	if read := atomic.LoadInt64(&p.read); p.size > 0 && read > 0 {
		frac := float64(read) / float64(p.size)
		eta := time.Duration(secs*(1-frac)/frac) * time.Second
		line += fmt.Sprintf(", %.0f%%, ETA %s", 100*frac, eta.Round(time.Second))
	}
	fmt.Fprint(p.w, "\r\x1b[K"+line)
	p.drawn = true
}

func (p *progress) done() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}
