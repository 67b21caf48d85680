package plan

import (
	"errors"
	"fmt"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/ledger"
)

// IngestKey names an ingested record by source and natural key (or replay
// key).
type IngestKey struct{ Source, Key string }

// Ingest is the store-independent half of ledger.IngestStore.Ingest: what
// each record of a batch becomes, given the keys already stored.
type Ingest struct {
	Records []ledger.IngestRecord
	Results []ledger.IngestResult
	// Prepared are the records to append, with Index the record's index in
	// Records.
	Prepared []Prepared
	// dupOf maps a record to the earlier record of the batch with its key.
	dupOf map[int]int
}

// errChainMismatch fails a record whose entry_hash is not its Head.
var errChainMismatch = errors.New("chain_hash mismatch")

// NewIngest classifies rs: stored holds the stored records of their keys,
// replays the natural key stored under each of their replay keys. Records
// to append are prepared (ledger.Record validation) with a signer that
// returns their Response and checks their Head.
func NewIngest(rs []ledger.IngestRecord, stored map[IngestKey]ledger.IngestResult, digests map[IngestKey]acs.Hash, replays map[IngestKey]string, maxBytes int) *Ingest {
	in := &Ingest{Records: rs, Results: make([]ledger.IngestResult, len(rs)), dupOf: make(map[int]int)}
	first := make(map[IngestKey]int)
	firstReplay := make(map[IngestKey]string)
	for i, r := range rs {
		res := &in.Results[i]
		res.Source, res.Key, res.File, res.Record, res.Flags = r.Source, r.Key, r.File, r.Record, r.Flags
		quarantine := func(reason, detail string) {
			res.Status, res.Reason, res.Detail = ledger.IngestQuarantined, reason, detail
		}
		if r.Quarantine != nil {
			quarantine(r.Quarantine.Reason, r.Quarantine.Detail)
			continue
		}
		k := IngestKey{r.Source, r.Key}
		if old, ok := stored[k]; ok {
			if digests[k] != r.Digest {
				quarantine(ledger.ReasonKeyConflict, fmt.Sprintf("%s record %q is stored with other content (session %q position %d)", r.Source, r.Key, old.SessionID, old.Position))
				continue
			}
			*res = old
			res.Status, res.File, res.Record = ledger.IngestDuplicate, r.File, r.Record
			continue
		}
		if j, ok := first[k]; ok {
			if rs[j].Digest != r.Digest {
				quarantine(ledger.ReasonKeyConflict, fmt.Sprintf("%s record %q appears earlier in the batch with other content", r.Source, r.Key))
				continue
			}
			in.dupOf[i] = j
			continue
		}
		if r.ReplayKey != "" {
			rk := IngestKey{r.Source, r.ReplayKey}
			other, ok := replays[rk]
			if !ok {
				other, ok = firstReplay[rk]
			}
			if ok && other != r.Key {
				quarantine(ledger.ReasonReplayedJTI, fmt.Sprintf("replay key %q was already used by %s record %q", r.ReplayKey, r.Source, other))
				continue
			}
			firstReplay[rk] = r.Key
		}
		p, err := PrepareParsed(i, r.Entry, r.Parsed, maxBytes)
		if err != nil {
			quarantine(ledger.ReasonLedgerRefused, err.Error())
			continue
		}
		p.Params = r.Params
		resp, head := r.Response, r.Head
		if resp != nil || head != nil {
			p.Sign = func(a ledger.Appended) ([]byte, error) {
				if head != nil && a.EntryHash != *head {
					return nil, fmt.Errorf("%w: the source published %s, the ledger computed %s at position %d", errChainMismatch, head, a.EntryHash, a.Position)
				}
				return resp, nil
			}
		}
		first[k] = i
		in.Prepared = append(in.Prepared, p)
	}
	return in
}

// Finish fills in the results of the prepared records from the plan that
// appended them, and of the batch's duplicates.
func (in *Ingest) Finish(p *Plan) {
	for j, pr := range in.Prepared {
		res := &in.Results[pr.Index]
		if err := p.Errs[j]; err != nil {
			res.Status, res.Reason, res.Detail = ledger.IngestQuarantined, ledger.ReasonLedgerRefused, err.Error()
			if errors.Is(err, errChainMismatch) {
				res.Reason = ledger.ReasonChainMismatch
			}
			continue
		}
		a := p.Results[j]
		res.Status, res.SessionID, res.Position, res.EntryHash = ledger.IngestAccepted, a.SessionID, a.Position, a.EntryHash
	}
	for i, j := range in.dupOf {
		res := &in.Results[i]
		first := in.Results[j]
		switch first.Status {
		case ledger.IngestAccepted, ledger.IngestDuplicate:
			res.Status, res.SessionID, res.Position, res.EntryHash = ledger.IngestDuplicate, first.SessionID, first.Position, first.EntryHash
		default:
			res.Status, res.Reason, res.Detail = ledger.IngestQuarantined, first.Reason, first.Detail
		}
	}
}

// Accepted returns the indexes of the records appended by this batch.
func (in *Ingest) Accepted() []int { return in.withStatus(ledger.IngestAccepted) }

// Quarantined returns the indexes of the records to quarantine.
func (in *Ingest) Quarantined() []int { return in.withStatus(ledger.IngestQuarantined) }

func (in *Ingest) withStatus(st ledger.IngestStatus) []int {
	var out []int
	for i, r := range in.Results {
		if r.Status == st {
			out = append(out, i)
		}
	}
	return out
}

// IngestKeys returns the distinct natural and replay keys of rs, for the
// store's lookup.
func IngestKeys(rs []ledger.IngestRecord) (keys, replayKeys []IngestKey) {
	seen := make(map[IngestKey]bool)
	seenR := make(map[IngestKey]bool)
	for _, r := range rs {
		if r.Quarantine != nil {
			continue
		}
		if k := (IngestKey{r.Source, r.Key}); !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
		if r.ReplayKey != "" {
			if k := (IngestKey{r.Source, r.ReplayKey}); !seenR[k] {
				seenR[k] = true
				replayKeys = append(replayKeys, k)
			}
		}
	}
	return keys, replayKeys
}
