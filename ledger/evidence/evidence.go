// Package evidence builds evidence bundles (docs/evidence-bundle.md, format
// version 1) from the ledger: everything an auditor needs to check one
// session offline with verify.VerifyBundle or `acsverify bundle`. It also
// verifies sessions straight from the store, one or all of them (Reverifier),
// by building the bundle and verifying it in the same pass, so that the
// online report and the offline one are the same report.
package evidence

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"runtime/debug"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/tlog"
	"github.com/acsledger/acsledger/verify"
)

// Log is what Build and Verify need of the Merkle log; *tlog.Log
// implements it.
//
// Checkpoint returns the latest signed checkpoint with its cosignatures;
// CheckpointAt the one signed at a given size (an error wrapping
// tlog.ErrNotFound when none was). LastSessionLeaf returns the session's
// leaf with the highest index below a tree size, or an error wrapping
// tlog.ErrNotFound; SessionLeaves yields every leaf of a session, read from
// the leaves themselves and not from the store's entries.
// InclusionProof and ConsistencyProof return RFC 6962 proofs.
type Log interface {
	Checkpoint(ctx context.Context) ([]byte, error)
	CheckpointAt(ctx context.Context, size uint64) ([]byte, error)
	LastSessionLeaf(ctx context.Context, sessionID string, size uint64) (tlog.LoggedLeaf, error)
	SessionLeaves(ctx context.Context, sessionID string) iter.Seq2[tlog.LoggedLeaf, error]
	InclusionProof(ctx context.Context, index, size uint64) ([][]byte, error)
	ConsistencyProof(ctx context.Context, oldSize, newSize uint64) ([][]byte, error)
	VerifierKeys() []string
	// Timestamp returns the RFC 3161 time-stamp response of the
	// checkpoint of size; tlog.ErrNotFound if it has none.
	Timestamp(ctx context.Context, size uint64) ([]byte, error)
}

var _ Log = (*tlog.Log)(nil)

// Store is what evidence reads from the ledger: the chains, the signed
// response and the payloads (params, source records, their erasures)
// stored beside each entry, and the policy bundles the decisions
// reference.
type Store interface {
	ledger.ChainReader
	Response(ctx context.Context, sessionID string, position int64) ([]byte, error)
	ledger.PayloadReader
	ledger.PolicyBundleReader
}

// Options say what a bundle carries beside the session's evidence.
type Options struct {
	// ResponseKeys are the public keys that verify the Guardian's response
	// signatures. HMAC-SHA256 keys are secret and are left out.
	ResponseKeys []*sig.PublicKey
	// Witnesses and WitnessQuorum are the log's witness policy
	// (signed-note verifier keys, k of n).
	Witnesses     []string
	WitnessQuorum int
	// IncludePolicies puts each policy bundle's content in the bundle, not
	// only its digest.
	IncludePolicies bool
	// IncludeParams puts each step's request params in the bundle, so
	// that a verifier checks them against request_hash. They hold what
	// the Guardian redacted from its decisions (secrets, personal data),
	// so a bundle leaves them out unless asked; source records of
	// ingested entries are always carried while they exist. Verify (the
	// online check) always includes them: its bundle never leaves the
	// process.
	IncludeParams bool
	// SinceSize, when not 0, is the tree size of the checkpoint of an
	// earlier bundle of the session: the bundle then also carries the
	// checkpoint signed at that size and a consistency proof from it to
	// the latest, so that `acsverify bundle --since` can show the later
	// bundle extends the earlier one (docs/evidence-bundle.md). A size the
	// log never signed, or no longer has (a log restored from an older
	// backup), is ledger.ErrNotFound; without a log, ErrNoLog. Both come
	// before anything is written.
	SinceSize uint64
	// TSACerts are the PEM certificates of the time-stamping authority
	// (serve --tsa-cert) the bundle carries in keys.tsa_certs.
	TSACerts []string
}

// ErrNoLog is Build's answer to Options.SinceSize without a Merkle log.
var ErrNoLog = errors.New("a bundle since a tree size needs the Merkle log, and there is none")

// Summary says what Build wrote.
type Summary struct {
	Entries   int64
	Responses int64
	// Sources and Params count the payloads carried, Erased the erasure
	// records listed, Missing the payloads listed as missing (gone
	// without an erasure record: payload_missing).
	Sources, Params, Erased, Missing int64
	// Anchored is false when the bundle has no anchor: no log was given,
	// the log has no checkpoint yet, or no entry of the session is covered
	// by the latest checkpoint. A verifier then reports not_anchored.
	Anchored bool
	// AnchoredThrough is the number of leading entries the anchor covers
	// (the anchored position + 1); entries after it are not yet in a
	// checkpoint.
	AnchoredThrough int64
	// TreeSize is the size of the checkpoint the bundle carries, 0 if none.
	TreeSize uint64
}

// Build writes the evidence bundle of a session to w, in the "steps" layout
// (each entry with the signed response beside it) so that a verifier's
// memory stays flat whatever the session's length. Build itself reads the
// chain a page at a time and holds one entry and its response.
//
// The bundle carries the policy bundle records (IncludePolicies adds their
// content), the latest checkpoint of log with its cosignatures, and one
// anchor: the inclusion proof of the last entry the checkpoint covers, which
// anchors every entry before it through the chain links. log may be nil:
// the bundle then has no checkpoint and no anchor, and verifying it reports
// not_anchored (the format has no other way to say it), as Summary does.
//
// An unknown session is ledger.ErrNotFound, returned before anything is
// written. An error after writing began leaves w holding a truncated bundle
// that no verifier accepts; callers writing to a file should write to a
// temporary one and rename it on success.
func Build(ctx context.Context, store Store, log Log, sessionID string, w io.Writer, opts Options) (Summary, error) {
	var sum Summary
	if _, err := store.Session(ctx, sessionID); err != nil {
		return sum, fmt.Errorf("couldn't load session %s: %w", sessionID, err)
	}
	keys, err := bundleKeys(log, opts)
	if err != nil {
		return sum, err
	}
	policies, err := policyRecords(ctx, store, opts.IncludePolicies)
	if err != nil {
		return sum, err
	}
	var anchor *verify.Anchor
	var checkpoints []string
	var consistency []verify.ConsistencyProof
	var timestamps []verify.Timestamp
	var treeSize uint64
	if log == nil && opts.SinceSize != 0 {
		return sum, ErrNoLog
	}
	if log != nil {
		var checkpoint []byte
		checkpoint, treeSize, anchor, err = anchorSession(ctx, log, sessionID)
		if err != nil {
			return sum, err
		}
		if checkpoint != nil {
			checkpoints = []string{string(checkpoint)}
		}
		switch {
		case opts.SinceSize == 0 || opts.SinceSize == treeSize:
		case opts.SinceSize > treeSize:
			return sum, fmt.Errorf("%w: the log signed no checkpoint at tree size %d (its latest is of size %d)", ledger.ErrNotFound, opts.SinceSize, treeSize)
		default:
			old, proof, err := sinceProof(ctx, log, opts.SinceSize, treeSize)
			if err != nil {
				return sum, err
			}
			checkpoints = []string{string(old), string(checkpoint)}
			consistency = []verify.ConsistencyProof{{OldSize: opts.SinceSize, NewSize: treeSize, Proof: proof}}
		}
		if timestamps, err = checkpointTimestamps(ctx, log, checkpoints); err != nil {
			return sum, err
		}
	}
	// The length is read after the log: every leaf the anchor was chosen
	// from names an entry committed before this read, so an honest chain
	// is at least as long as the anchor says.
	sess, err := store.Session(ctx, sessionID)
	if err != nil {
		return sum, fmt.Errorf("couldn't load session %s: %w", sessionID, err)
	}

	bw := bufio.NewWriterSize(w, 64<<10)
	bw.WriteString(`{"format":"` + verify.BundleFormat + `","version":1,"session_id":`)
	writeJSON(bw, sessionID)
	bw.WriteString(`,"keys":`)
	writeJSON(bw, keys)
	bw.WriteString(`,"policy_bundles":`)
	writeJSON(bw, policies)
	if checkpoints != nil {
		bw.WriteString(`,"checkpoints":`)
		writeJSON(bw, checkpoints)
		// The checkpoint's size, also when none of the session's entries
		// is in it yet (no anchor).
		sum.TreeSize = treeSize
	}
	if timestamps != nil {
		bw.WriteString(`,"timestamps":`)
		writeJSON(bw, timestamps)
	}
	if consistency != nil {
		bw.WriteString(`,"consistency_proofs":`)
		writeJSON(bw, consistency)
	}
	if anchor != nil {
		bw.WriteString(`,"anchors":`)
		writeJSON(bw, []*verify.Anchor{anchor})
		sum.Anchored = true
		sum.AnchoredThrough = int64(anchor.Position) + 1
	}
	bw.WriteString(`,"steps":[`)
	pw := payloadWindow{store: store, sessionID: sessionID, withParams: opts.IncludeParams}
	for e, err := range ledger.AllEntries(ctx, store, sessionID) {
		if err != nil {
			return sum, fmt.Errorf("couldn't read session %s at position %d: %w", sessionID, sum.Entries, err)
		}
		if e.Position >= sess.Length {
			// Appended after Session was read: the anchor and the
			// length describe the chain as it stood then.
			break
		}
		resp, err := store.Response(ctx, sessionID, e.Position)
		switch {
		case errors.Is(err, ledger.ErrNotFound):
			resp = nil
		case err != nil:
			return sum, fmt.Errorf("couldn't read the response of session %s at position %d: %w", sessionID, e.Position, err)
		default:
			sum.Responses++
		}
		if sum.Entries > 0 {
			bw.WriteByte(',')
		}
		bw.WriteString(`{"entry":`)
		bw.Write(FullEntry(e.Content, e.EntryHash, e.PreviousHash))
		if resp != nil {
			bw.WriteString(`,"response":`)
			bw.Write(bytes.TrimSpace(resp))
		}
		ps, err := pw.at(ctx, e.Position)
		if err != nil {
			return sum, err
		}
		writePayloads(bw, &sum, e, resp != nil, ps, opts.IncludeParams)
		bw.WriteByte('}')
		sum.Entries++
	}
	bw.WriteString("]}\n")
	if err := bw.Flush(); err != nil {
		return sum, fmt.Errorf("couldn't write the bundle of session %s: %w", sessionID, err)
	}
	return sum, nil
}

// writeJSON encodes v compactly. Values are the package's own types, so an
// encoding error is a bug; it surfaces as invalid output and in tests.
func writeJSON(w *bufio.Writer, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("evidence: couldn't encode %T: %v", v, err))
	}
	w.Write(b)
}

// FullEntry returns the complete ContextEntry as a bundle carries it: the
// stored canonical content with entry_hash and previous_hash added. Hashing
// it by ACS §8.2 gives back entryHash, since both members are left out of
// the hash.
func FullEntry(content []byte, entryHash acs.Hash, prev *acs.Hash) []byte {
	out := make([]byte, 0, len(content)+160)
	out = append(out, content[:len(content)-1]...)
	if len(content) > 2 {
		out = append(out, ',')
	}
	out = append(out, `"entry_hash":"`...)
	out = append(out, entryHash.String()...)
	out = append(out, `","previous_hash":`...)
	if prev == nil {
		out = append(out, "null"...)
	} else {
		out = append(out, '"')
		out = append(out, prev.String()...)
		out = append(out, '"')
	}
	return append(out, '}')
}

func bundleKeys(log Log, opts Options) (*verify.BundleKeys, error) {
	k := &verify.BundleKeys{Witnesses: opts.Witnesses, WitnessQuorum: opts.WitnessQuorum, TSACerts: opts.TSACerts}
	for _, pk := range opts.ResponseKeys {
		if pk.Algorithm() == sig.HMACSHA256 {
			continue // secret: a bundle never carries it
		}
		b, err := pk.MarshalPublic()
		if err != nil {
			return nil, fmt.Errorf("couldn't encode response key %s: %w", pk.KeyID(), err)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, b); err != nil {
			return nil, fmt.Errorf("couldn't encode response key %s: %w", pk.KeyID(), err)
		}
		k.ResponseKeys = append(k.ResponseKeys, compact.Bytes())
	}
	if log != nil {
		k.LogKeys = log.VerifierKeys()
	}
	return k, nil
}

// checkpointTimestamps returns the stored RFC 3161 time-stamps of the
// checkpoints a bundle carries; a checkpoint not (yet) stamped has none.
func checkpointTimestamps(ctx context.Context, log Log, checkpoints []string) ([]verify.Timestamp, error) {
	var out []verify.Timestamp
	for _, cp := range checkpoints {
		size, err := checkpointSize([]byte(cp))
		if err != nil {
			return nil, err
		}
		resp, err := log.Timestamp(ctx, size)
		if errors.Is(err, tlog.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("couldn't read the time-stamp of checkpoint %d: %w", size, err)
		}
		out = append(out, verify.Timestamp{TreeSize: size, Response: resp})
	}
	return out, nil
}

func policyRecords(ctx context.Context, store ledger.PolicyBundleReader, content bool) ([]verify.PolicyBundleRecord, error) {
	list, err := store.PolicyBundles(ctx)
	if err != nil {
		return nil, fmt.Errorf("couldn't list policy bundles: %w", err)
	}
	out := make([]verify.PolicyBundleRecord, 0, len(list))
	for _, p := range list {
		r := verify.PolicyBundleRecord{PolicyID: p.ID, PolicyVersion: p.Version, Digest: p.Digest, RecordedAt: p.RecordedAt.UTC()}
		if content {
			full, err := store.PolicyBundle(ctx, p.ID, p.Version)
			if err != nil {
				return nil, fmt.Errorf("couldn't load policy bundle %s %s: %w", p.ID, p.Version, err)
			}
			r.Content = full.Content
		}
		out = append(out, r)
	}
	return out, nil
}

// anchorSession returns the latest checkpoint and the inclusion proof in it
// of the session's last leaf it covers, or a nil anchor when it covers none
// (or there is no checkpoint yet).
//
// The leaf is found in the log, not from the store's length: when the
// store lost the session's tail, the anchor names a position past the
// chain's end, and every verifier of the bundle reports
// anchor_without_entry.
func anchorSession(ctx context.Context, log Log, sessionID string) (signed []byte, size uint64, _ *verify.Anchor, _ error) {
	signed, err := log.Checkpoint(ctx)
	if errors.Is(err, tlog.ErrNotFound) {
		return nil, 0, nil, nil
	}
	if err != nil {
		return nil, 0, nil, fmt.Errorf("couldn't read the latest checkpoint: %w", err)
	}
	cp, err := checkpointSize(signed)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("the log's latest checkpoint: %w", err)
	}
	ll, err := log.LastSessionLeaf(ctx, sessionID, cp)
	if errors.Is(err, tlog.ErrNotFound) {
		return signed, cp, nil, nil
	}
	if err != nil {
		return nil, 0, nil, fmt.Errorf("couldn't find the last leaf of session %s: %w", sessionID, err)
	}
	proof, err := log.InclusionProof(ctx, ll.Index, cp)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("couldn't prove leaf %d in the tree of size %d: %w", ll.Index, cp, err)
	}
	return signed, cp, &verify.Anchor{Position: uint64(ll.Position), LeafIndex: ll.Index, TreeSize: cp, Proof: proof}, nil
}

// checkpointSize is the tree size of a signed checkpoint note.
func checkpointSize(signed []byte) (uint64, error) {
	text, _, ok := bytes.Cut(signed, []byte("\n\n"))
	if !ok {
		return 0, errors.New("not a signed note")
	}
	cp, err := tlog.ParseCheckpoint(append(text, '\n'))
	if err != nil {
		return 0, fmt.Errorf("couldn't parse it: %w", err)
	}
	return cp.Size, nil
}

// sinceProof returns the checkpoint signed at size old and the consistency
// proof from it to the tree of size cur.
func sinceProof(ctx context.Context, log Log, old, cur uint64) ([]byte, [][]byte, error) {
	note, err := log.CheckpointAt(ctx, old)
	if errors.Is(err, tlog.ErrNotFound) {
		return nil, nil, fmt.Errorf("%w: the log signed no checkpoint at tree size %d", ledger.ErrNotFound, old)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("couldn't read the checkpoint of size %d: %w", old, err)
	}
	proof, err := log.ConsistencyProof(ctx, old, cur)
	if err != nil {
		return nil, nil, fmt.Errorf("couldn't prove the tree of size %d extends the one of size %d: %w", cur, old, err)
	}
	return note, proof, nil
}

// Report is the JSON report of a verification, the same shape as
// `acsverify bundle --json` prints (docs/acsverify.md), with the counts of
// what a verification within limits (an uploaded bundle) did not list.
type Report struct {
	verify.ReportJSON
	FindingsDropped int `json:"findings_dropped,omitempty"`
	NoticesDropped  int `json:"notices_dropped,omitempty"`
}

// NewReport converts a verify.Report to its JSON shape.
func NewReport(r *verify.Report) Report {
	return Report{ReportJSON: r.JSON(), FindingsDropped: r.FindingsDropped, NoticesDropped: r.NoticesDropped}
}

// Verify checks a session straight from the store: it builds the session's
// bundle and verifies it with verify.VerifyBundle in the same pass (through
// a pipe, holding one step at a time), so the report is the one an auditor
// gets from the exported bundle with the same trust. Then it holds the
// session against every leaf the log has for it (logged_entry_missing,
// logged_entry_mismatch, truncated), which a bundle cannot show.
func Verify(ctx context.Context, store Store, log Log, sessionID string, opts Options, trust *verify.Trust) (*verify.Report, error) {
	if _, err := store.Session(ctx, sessionID); err != nil {
		return nil, fmt.Errorf("couldn't load session %s: %w", sessionID, err)
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		var err error
		// Build runs on a goroutine of its own, outside the recovery of
		// whoever called Verify (an HTTP handler, a re-verification
		// run): a fault in it becomes this session's error rather than
		// the end of the process.
		defer func() {
			if p := recover(); p != nil {
				slog.Error("evidence: building a bundle panicked", "session_id", sessionID, "panic", p, "stack", string(debug.Stack()))
				err = fmt.Errorf("internal error: building the bundle of session %s panicked: %v", sessionID, p)
			}
			pw.CloseWithError(err)
			done <- err
		}()
		// The online check holds the params against request_hash too.
		opts.IncludeParams = true
		_, err = Build(ctx, store, log, sessionID, pw, opts)
	}()
	rep, verr := verify.VerifyBundle(pr, trust)
	pr.CloseWithError(errors.New("verifier stopped reading"))
	berr := <-done
	if berr != nil {
		return nil, berr
	}
	if verr != nil {
		return nil, fmt.Errorf("couldn't verify the bundle of session %s: %w", sessionID, verr)
	}
	if log != nil {
		fs, err := checkLog(ctx, store, log, sessionID)
		if err != nil {
			return nil, err
		}
		rep.Findings = append(rep.Findings, fs...)
	}
	return rep, nil
}
