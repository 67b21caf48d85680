package tlog

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/acsledger/acsledger/internal/tick"
	"github.com/acsledger/acsledger/verify"
)

// WitnessConfig names a c2sp.org/tlog-witness witness the log asks to cosign
// its checkpoints.
type WitnessConfig struct {
	// URL is the witness's submission prefix; the log POSTs to
	// URL + "/add-checkpoint".
	URL string
	// VerifierKey is the witness's cosignature verifier key ([GenerateKey]
	// text form, type 0x04 or 0x06).
	VerifierKey string
	// Client is the HTTP client (default: one with a 10 s timeout).
	Client *http.Client
}

type witnessClient struct {
	url string
	v   note.Verifier
	hc  *http.Client

	mu   sync.Mutex
	size uint64 // the size the witness last cosigned, as far as we know
}

func newWitnessClient(c WitnessConfig) (*witnessClient, error) {
	v, err := verify.NoteVerifier(c.VerifierKey)
	if err != nil {
		return nil, fmt.Errorf("tlog: witness %s: %w", c.URL, err)
	}
	hc := c.Client
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	return &witnessClient{url: strings.TrimSuffix(c.URL, "/"), v: v, hc: hc}, nil
}

// runWitnessing asks every witness to cosign each new checkpoint, and retries
// failed ones every few seconds.
func (l *Log) runWitnessing(ctx context.Context) {
	tick.Every(ctx, 5*time.Second, l.signed, func() { l.Witness(ctx) })
}

// Witness asks every configured witness to cosign the latest checkpoint and
// stores the cosignatures it gets. Failures are logged, not returned: an
// unreachable witness must never stop the log.
func (l *Log) Witness(ctx context.Context) {
	cp, signed, err := l.latestSize(ctx)
	if err != nil {
		return
	}
	for _, w := range l.witnesses {
		if err := l.cosign(ctx, w, cp, signed); err != nil {
			l.log.Warn("witness did not cosign", "witness", w.url, "size", cp.Size, "err", err)
		}
	}
	l.updatePublished(ctx)
}

// errWitnessConflict carries the size a witness says it last cosigned.
type errWitnessConflict struct{ size uint64 }

func (e *errWitnessConflict) Error() string {
	return fmt.Sprintf("witness has cosigned size %d", e.size)
}

func (l *Log) cosign(ctx context.Context, w *witnessClient, cp Checkpoint, signed []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.size == cp.Size && w.size > 0 {
		return nil
	}
	for attempt := 0; attempt < 2; attempt++ {
		lines, err := l.addCheckpoint(ctx, w, cp, signed)
		var conflict *errWitnessConflict
		if errors.As(err, &conflict) && attempt == 0 && conflict.size <= cp.Size {
			w.size = conflict.size // learn the witness's state, then retry once
			continue
		}
		if err != nil {
			return err
		}
		for _, line := range lines {
			if err := l.s.AddCosignature(ctx, cp.Size, line); err != nil {
				return fmt.Errorf("couldn't store cosignature: %w", err)
			}
		}
		w.size = cp.Size
		return nil
	}
	return errors.New("witness kept reporting a conflict")
}

// addCheckpoint does one tlog-witness add-checkpoint call and returns the
// verified cosignature lines of the configured witness key.
func (l *Log) addCheckpoint(ctx context.Context, w *witnessClient, cp Checkpoint, signed []byte) ([][]byte, error) {
	r := &treeReader{s: l.s, size: cp.Size, cache: l.cache}
	p, err := r.consistency(ctx, w.size)
	if err != nil {
		return nil, err
	}
	body := fmt.Appendf(nil, "old %d\n", w.size)
	for _, h := range p {
		body = base64.StdEncoding.AppendEncode(body, h)
		body = append(body, '\n')
	}
	body = append(body, '\n')
	body = append(body, signed...)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url+"/add-checkpoint", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	resp, err := w.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	respBody, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusConflict {
		ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		if ct == "text/x.tlog.size" {
			size, err := strconv.ParseUint(strings.TrimSuffix(string(respBody), "\n"), 10, 64)
			if err == nil {
				return nil, &errWitnessConflict{size: size}
			}
		}
		return nil, fmt.Errorf("witness answered 409: %q", respBody)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("witness answered %s: %q", resp.Status, bytes.TrimSpace(respBody))
	}
	// tlog-witness: the response is signature lines; appended to the note
	// they verify with the witness key alone (the log's lines are unknown
	// to that verifier list and ignored).
	n, err := note.Open(append(append([]byte(nil), signed...), respBody...), note.VerifierList(w.v))
	if err != nil {
		return nil, fmt.Errorf("witness response does not verify: %w", err)
	}
	var lines [][]byte
	for _, s := range n.Sigs {
		sig, _ := base64.StdEncoding.DecodeString(s.Base64)
		if s.Name != w.v.Name() || len(sig) < 4 {
			continue
		}
		lines = append(lines, fmt.Appendf(nil, "\u2014 %s %s\n", s.Name, s.Base64))
	}
	if len(lines) == 0 {
		return nil, errors.New("witness response carries no cosignature from its key")
	}
	return lines, nil
}
