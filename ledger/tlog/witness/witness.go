// Package witness is a minimal c2sp.org/tlog-witness witness: an
// http.Handler for POST /add-checkpoint that checks a log's checkpoint
// signature and its consistency with the last checkpoint it cosigned for that
// log, remembers the new size, and returns a c2sp.org/tlog-cosignature.
//
// [tlog-witness]: https://c2sp.org/tlog-witness
// [tlog-cosignature]: https://c2sp.org/tlog-cosignature
package witness

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acsledger/acsledger/internal/durable"
	"github.com/acsledger/acsledger/ledger/tlog"
	"github.com/acsledger/acsledger/verify"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

// maxBody bounds a request: 63 proof lines, a checkpoint and up to 16
// signatures, some of them post-quantum.
const maxBody = 128 << 10

// Log is a log the witness follows.
type Log struct {
	Origin string
	// VerifierKeys are the log's keys; a checkpoint needs one valid
	// signature from them.
	VerifierKeys []string
}

// Config configures a [Witness].
type Config struct {
	// Key is the witness's cosignature signer key ([tlog.GenerateKey] with
	// tlog.CosignatureEd25519 or tlog.CosignatureMLDSA44).
	Key  string
	Logs []Log
	// StatePath, if set, is a JSON file holding the latest cosigned size
	// and root per origin; it is written (atomically) before each reply.
	StatePath string
	// Now stamps cosignatures (default time.Now).
	Now func() time.Time
}

// Witness is the add-checkpoint handler.
type Witness struct {
	signer    note.Signer
	verifiers map[string]note.Verifiers
	path      string

	mu    sync.Mutex // serializes check-and-update, as tlog-witness requires
	state map[string]treeHead
}

type treeHead struct {
	Size uint64 `json:"size"`
	Root []byte `json:"root"`
}

// New returns a witness, loading StatePath if it exists.
func New(cfg Config) (*Witness, error) {
	signer, err := tlog.NewSigner(cfg.Key, cfg.Now)
	if err != nil {
		return nil, fmt.Errorf("witness key: %w", err)
	}
	w := &Witness{signer: signer, verifiers: make(map[string]note.Verifiers), path: cfg.StatePath, state: make(map[string]treeHead)}
	for _, l := range cfg.Logs {
		var vs []note.Verifier
		for _, k := range l.VerifierKeys {
			v, err := verify.NoteVerifier(k)
			if err != nil {
				return nil, fmt.Errorf("log %s: %w", l.Origin, err)
			}
			vs = append(vs, v)
		}
		w.verifiers[l.Origin] = note.VerifierList(vs...)
	}
	if w.path != "" {
		b, err := os.ReadFile(w.path)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return nil, err
		default:
			if err := json.Unmarshal(b, &w.state); err != nil {
				return nil, fmt.Errorf("witness state %s: %w", w.path, err)
			}
		}
	}
	return w, nil
}

// httpError carries the status tlog-witness assigns to a failure.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func fail(status int, format string, args ...any) error {
	return &httpError{status: status, msg: fmt.Sprintf(format, args...)}
}

// conflictError is the 409 that tells the client the size we cosigned.
type conflictError struct{ size uint64 }

func (e *conflictError) Error() string { return fmt.Sprintf("latest cosigned size is %d", e.size) }

// ServeHTTP handles POST /add-checkpoint (the path's prefix is the caller's).
func (w *Witness) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/add-checkpoint") {
		http.Error(rw, "only POST .../add-checkpoint is served", http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody {
		http.Error(rw, "request body unreadable or larger than 128 KiB", http.StatusBadRequest)
		return
	}
	lines, err := w.AddCheckpoint(body)
	var conflict *conflictError
	var he *httpError
	switch {
	case errors.As(err, &conflict):
		rw.Header().Set("Content-Type", "text/x.tlog.size")
		rw.WriteHeader(http.StatusConflict)
		fmt.Fprintf(rw, "%d\n", conflict.size)
	case errors.As(err, &he):
		http.Error(rw, he.msg, he.status)
	case err != nil:
		http.Error(rw, "internal error", http.StatusInternalServerError)
	default:
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		rw.Write(lines)
	}
}

// AddCheckpoint runs one add-checkpoint request body and returns the
// cosignature lines.
func (w *Witness) AddCheckpoint(body []byte) ([]byte, error) {
	oldSize, proofHashes, signed, err := parseRequest(body)
	if err != nil {
		return nil, fail(http.StatusBadRequest, "%v", err)
	}
	origin, _, _ := strings.Cut(string(signed), "\n")
	verifiers, ok := w.verifiers[origin]
	if !ok {
		return nil, fail(http.StatusNotFound, "unknown log %q", origin)
	}
	n, err := note.Open(signed, verifiers)
	if err != nil {
		return nil, fail(http.StatusForbidden, "checkpoint signature: %v", err)
	}
	cp, err := verify.ParseCheckpointHead([]byte(n.Text))
	if err != nil {
		return nil, fail(http.StatusBadRequest, "%v", err)
	}
	if oldSize > cp.Size {
		return nil, fail(http.StatusBadRequest, "old size %d is larger than the checkpoint size %d", oldSize, cp.Size)
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	prev := w.state[origin]
	if prev.Size != oldSize {
		return nil, &conflictError{size: prev.Size}
	}
	switch {
	case oldSize == cp.Size:
		if oldSize > 0 && !bytes.Equal(prev.Root, cp.Root[:]) {
			return nil, fail(http.StatusConflict, "a different tree was cosigned at size %d", cp.Size)
		}
		if len(proofHashes) != 0 {
			return nil, fail(http.StatusUnprocessableEntity, "equal sizes need an empty proof")
		}
	case oldSize == 0:
		if len(proofHashes) != 0 {
			return nil, fail(http.StatusUnprocessableEntity, "old size 0 needs an empty proof")
		}
	default:
		if err := proof.VerifyConsistency(rfc6962.DefaultHasher, oldSize, cp.Size, proofHashes, prev.Root, cp.Root[:]); err != nil {
			return nil, fail(http.StatusUnprocessableEntity, "consistency proof %d -> %d: %v", oldSize, cp.Size, err)
		}
	}
	w.state[origin] = treeHead{Size: cp.Size, Root: cp.Root[:]}
	if err := w.save(); err != nil {
		w.state[origin] = prev
		return nil, err
	}
	sig, err := w.signer.Sign([]byte(n.Text))
	if err != nil {
		return nil, err
	}
	raw := binary.BigEndian.AppendUint32(nil, w.signer.KeyHash())
	return fmt.Appendf(nil, "\u2014 %s %s\n", w.signer.Name(), base64.StdEncoding.EncodeToString(append(raw, sig...))), nil
}

// parseRequest splits the tlog-witness request body.
func parseRequest(body []byte) (oldSize uint64, hashes [][]byte, signed []byte, err error) {
	br := bufio.NewReader(bytes.NewReader(body))
	line, err := br.ReadString('\n')
	if err != nil {
		return 0, nil, nil, errors.New("line 1: missing the old size line")
	}
	num, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "old ")
	if !ok || num == "" || (len(num) > 1 && num[0] == '0') {
		return 0, nil, nil, fmt.Errorf("line 1: %q is not \"old <size>\"", strings.TrimSuffix(line, "\n"))
	}
	if oldSize, err = strconv.ParseUint(num, 10, 64); err != nil {
		return 0, nil, nil, fmt.Errorf("line 1: %q is not a decimal size", num)
	}
	consumed := len(line)
	for i := 2; ; i++ {
		line, err := br.ReadString('\n')
		if err != nil {
			return 0, nil, nil, fmt.Errorf("line %d: missing the empty line before the checkpoint", i)
		}
		consumed += len(line)
		if line == "\n" {
			break
		}
		if len(hashes) == 63 {
			return 0, nil, nil, errors.New("more than 63 consistency proof lines")
		}
		h, err := base64.StdEncoding.Strict().DecodeString(strings.TrimSuffix(line, "\n"))
		if err != nil || len(h) != 32 {
			return 0, nil, nil, fmt.Errorf("line %d: not a base64 SHA-256 hash", i)
		}
		hashes = append(hashes, h)
	}
	return oldSize, hashes, body[consumed:], nil
}

// save writes the state file atomically: temp file, fsync, rename.
func (w *Witness) save() error {
	if w.path == "" {
		return nil
	}
	b, err := json.Marshal(w.state)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(w.path), ".witness-state-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := durable.Write(f, b); err != nil {
		return err
	}
	return os.Rename(f.Name(), w.path)
}
