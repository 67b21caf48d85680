package evidence

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/verify"
)

// payloadWindowSize is how many positions one read of payloads covers at
// most: Build reads them a range at a time beside the entries, not one
// query per entry, and the store stops a read early once it holds
// ledger.PayloadReadBudget bytes.
const payloadWindowSize = 1000

// payloadWindow reads a session's payloads a range of positions at a
// time, for a reader going through the chain in order.
type payloadWindow struct {
	store      ledger.PayloadReader
	sessionID  string
	withParams bool

	from, to int64 // the range read: [from, to)
	byPos    map[int64][]ledger.Payload
}

// at returns the payloads stored or erased beside the entry at position.
func (w *payloadWindow) at(ctx context.Context, position int64) ([]ledger.Payload, error) {
	if w.byPos == nil || position < w.from || position >= w.to {
		ps, through, err := w.store.Payloads(ctx, w.sessionID, position, position+payloadWindowSize, w.withParams)
		if err != nil {
			return nil, fmt.Errorf("couldn't read the payloads of session %s from position %d: %w", w.sessionID, position, err)
		}
		w.from, w.to = position, through
		w.byPos = make(map[int64][]ledger.Payload, len(ps))
		for _, p := range ps {
			w.byPos[p.Position] = append(w.byPos[p.Position], p)
		}
	}
	return w.byPos[position], nil
}

// writePayloads writes a step's payload members (docs/evidence-bundle.md,
// "Payloads"): the source record when stored; the params when stored and
// asked for; the erasure records; and, as "missing", a payload the ledger
// should hold beside the entry and holds no trace of: a source the entry
// commits to by source_sha256, or the params of a step with request_hash
// and a signed response (the Guardian, and ingest of another Guardian's
// traffic, store both in the entry's transaction).
func writePayloads(bw *bufio.Writer, sum *Summary, e ledger.Entry, responded bool, ps []ledger.Payload, withParams bool) {
	var haveSource, haveParams bool
	var erased []verify.PayloadErasure
	for _, p := range ps {
		switch {
		case p.Erasure != nil:
			erased = append(erased, verify.PayloadErasure{Payload: p.Kind, ErasedAt: p.Erasure.ErasedAt.UTC().Truncate(time.Microsecond), Reason: p.Erasure.Reason, ErasedBy: p.Erasure.ErasedBy})
		case p.Kind == ledger.PayloadSource:
			haveSource = true
			bw.WriteString(`,"source":"`)
			writeBase64(bw, p.Bytes)
			bw.WriteByte('"')
			sum.Sources++
		case p.Kind == ledger.PayloadParams:
			haveParams = true
			if withParams {
				bw.WriteString(`,"params":"`)
				writeBase64(bw, p.Bytes)
				bw.WriteByte('"')
				sum.Params++
			}
		}
	}
	if len(erased) > 0 {
		bw.WriteString(`,"erased":`)
		writeJSON(bw, erased)
		sum.Erased += int64(len(erased))
	}
	var missing []string
	erasedKind := func(kind string) bool {
		for _, er := range erased {
			if er.Payload == kind {
				return true
			}
		}
		return false
	}
	if !haveSource && !erasedKind(ledger.PayloadSource) && hasMember(e.Content, "source_sha256") {
		missing = append(missing, ledger.PayloadSource)
	}
	if !haveParams && !erasedKind(ledger.PayloadParams) && responded && hasMember(e.Content, "request_hash") {
		missing = append(missing, ledger.PayloadParams)
	}
	if len(missing) > 0 {
		bw.WriteString(`,"missing":`)
		writeJSON(bw, missing)
		sum.Missing += int64(len(missing))
	}
}

// hasMember reports whether a canonical entry has a top-level member name
// whose value is not null.
func hasMember(content []byte, name string) bool {
	if !bytes.Contains(content, []byte(`"`+name+`"`)) {
		return false
	}
	v := acs.CanonicalMember(content, name)
	return v != nil && string(v) != "null"
}

func writeBase64(bw *bufio.Writer, b []byte) {
	enc := base64.NewEncoder(base64.StdEncoding, bw)
	enc.Write(b)
	enc.Close()
}
