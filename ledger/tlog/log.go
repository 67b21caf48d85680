package tlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"golang.org/x/mod/sumdb/note"

	"github.com/acsledger/acsledger/verify"
)

// ErrInconsistent means the stored log does not extend its own latest
// checkpoint (a truncated log, a rewritten tile or leaf, a second tree for a
// signed size). The log refuses to sign anything further.
var ErrInconsistent = errors.New("tlog: stored tree is not consistent with the latest checkpoint")

// Config configures a [Log].
type Config struct {
	// Origin is the checkpoint origin line, e.g. "ledger.example.com/log".
	Origin string
	// Keys are signer keys in the text form of [GenerateKey] (or
	// note.GenerateKey). The first must be an Ed25519 key named Origin;
	// further keys (e.g. a [CosignatureMLDSA44] key) add signature lines.
	Keys []string
	// BatchSize caps the leaves integrated in one transaction (default 256).
	// It bounds the latency of a batch when appends arrive at a steady pace.
	BatchSize int
	// BacklogBatchSize caps the leaves [Log.Run] integrates in one
	// transaction while a backlog exists, i.e. after a batch came back full
	// (default 65536, never below BatchSize). One transaction and one
	// checkpoint per large batch is what makes catching up fast; two batches
	// are in memory at a time (about 300 bytes per leaf each).
	BacklogBatchSize int
	// BatchDelay is the longest a pending entry waits for the next
	// integration when nobody calls [Log.Notify] (default 250ms).
	BatchDelay time.Duration
	// Witnesses are asked to cosign each new checkpoint (see witness.go).
	Witnesses []WitnessConfig
	// WitnessPolicy, if set, holds the log to its witnesses: a checkpoint
	// is published (served at /checkpoint, used for proofs, receipts and
	// bundles, written to PublishDir) only once its stored cosignatures
	// satisfy the policy's quorum (published.go). Its witnesses are asked
	// beside Witnesses. Without it every signed checkpoint is published
	// at once and witnessing is best effort.
	WitnessPolicy *WitnessPolicy
	// PublishDir, if set, receives every checkpoint as a write-once file.
	PublishDir string
	// Now is the clock for cosignature timestamps (default time.Now).
	Now func() time.Time
	// Logger receives integration and witnessing events (default discard).
	Logger *slog.Logger
	// OnCheckpoint, if set, is called after each new checkpoint is stored
	// (for metrics and latency measurements); it must not block.
	OnCheckpoint func(Checkpoint)
}

// Log is the Merkle log over a [Storage]. Its integrator ([Log.Run] or
// [Log.Integrate]) is the only writer of leaves; any number of goroutines may
// read proofs and tiles concurrently.
type Log struct {
	s         Storage
	origin    string
	signers   []note.Signer
	cose      *coseKey // the first (Ed25519) key, for COSE receipts
	verifiers note.Verifiers
	vkeys     []string
	batch     int
	backlog   int
	delay     time.Duration
	now       func() time.Time
	log       *slog.Logger
	cache     *tileCache
	witnesses []*witnessClient
	publish   string
	onCP      func(Checkpoint)
	notify    chan struct{}
	signed    chan struct{}
	// runErr is the error of Run's latest integration attempt, nil after
	// one that succeeded (Err).
	runErr atomic.Pointer[error]

	lastMu     sync.Mutex // guards the last verified checkpoint
	lastSigned []byte
	lastCP     Checkpoint

	policy *WitnessPolicy
	pubMu  sync.Mutex // guards the published checkpoint (with a policy)
	pub    published

	mu         sync.Mutex // guards the integrator state below
	rng        *compact.Range
	tails      [][]byte // tails[L]: the hashes of the incomplete tile at level L
	signedSize uint64   // size of the latest checkpoint known to be stored
}

// New opens the log, checks that the stored tree extends the latest stored
// checkpoint (refusing with ErrInconsistent otherwise), and signs a
// checkpoint if leaves were integrated after the last one (a crash between
// integration and signing).
func New(ctx context.Context, s Storage, cfg Config) (*Log, error) {
	if cfg.Origin == "" || strings.ContainsAny(cfg.Origin, "\n") {
		return nil, fmt.Errorf("tlog: invalid origin %q", cfg.Origin)
	}
	if len(cfg.Keys) == 0 {
		return nil, errors.New("tlog: no signing key")
	}
	l := &Log{
		s:       s,
		origin:  cfg.Origin,
		batch:   cfg.BatchSize,
		backlog: cfg.BacklogBatchSize,
		delay:   cfg.BatchDelay,
		now:     cfg.Now,
		log:     cfg.Logger,
		cache:   newTileCache(tileCacheSize),
		notify:  make(chan struct{}, 1),
		signed:  make(chan struct{}, 1),
	}
	if l.batch <= 0 {
		l.batch = 256
	}
	if l.backlog <= 0 {
		l.backlog = 65536
	}
	l.backlog = max(l.backlog, l.batch)
	if l.delay <= 0 {
		l.delay = 250 * time.Millisecond
	}
	if l.now == nil {
		l.now = time.Now
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	var vs []note.Verifier
	for i, k := range cfg.Keys {
		signer, vkey, err := signerAndVerifierKey(k, l.now)
		if err != nil {
			return nil, fmt.Errorf("tlog: key %d: %w", i, err)
		}
		if signer.Name() != cfg.Origin {
			return nil, fmt.Errorf("tlog: key %d is named %q, want the origin %q", i, signer.Name(), cfg.Origin)
		}
		if i == 0 && keyType(vkey) != sigTypeEd25519 {
			return nil, errors.New("tlog: the first key must be an Ed25519 note key")
		}
		v, err := verify.NoteVerifier(vkey)
		if err != nil {
			return nil, fmt.Errorf("tlog: key %d: %w", i, err)
		}
		if i == 0 {
			if l.cose, err = newCOSEKey(k, vkey); err != nil {
				return nil, fmt.Errorf("tlog: key %d: %w", i, err)
			}
		}
		l.signers = append(l.signers, signer)
		l.vkeys = append(l.vkeys, vkey)
		vs = append(vs, v)
	}
	l.verifiers = note.VerifierList(vs...)
	ws := cfg.Witnesses
	if p := cfg.WitnessPolicy; p != nil {
		if !p.NamesLog(l.vkeys) {
			return nil, errors.New("tlog: the witness policy's log lines name none of this log's keys")
		}
		for _, w := range p.Witnesses {
			if w.URL == "" {
				return nil, fmt.Errorf("tlog: witness policy: witness %q has no URL, so the log cannot ask it to cosign", w.Name)
			}
			ws = append(ws, WitnessConfig{URL: w.URL, VerifierKey: w.VerifierKey})
		}
		l.policy = p
	}
	for _, w := range ws {
		wc, err := newWitnessClient(w)
		if err != nil {
			return nil, err
		}
		l.witnesses = append(l.witnesses, wc)
	}
	l.publish = cfg.PublishDir
	l.onCP = cfg.OnCheckpoint
	if err := l.reload(ctx); err != nil {
		return nil, err
	}
	if err := l.signIfBehind(ctx); err != nil {
		return nil, err
	}
	if err := l.loadPublished(ctx); err != nil {
		return nil, err
	}
	return l, nil
}

// signerAndVerifierKey parses a signer key and derives its verifier key.
func signerAndVerifierKey(skey string, now func() time.Time) (note.Signer, string, error) {
	rest, ok := strings.CutPrefix(skey, "PRIVATE+KEY+")
	if !ok {
		return nil, "", errors.New("signer key does not start with PRIVATE+KEY+")
	}
	name, typ, seed, _, err := splitKey(rest)
	if err != nil {
		return nil, "", err
	}
	if len(seed) != 32 {
		return nil, "", fmt.Errorf("seed is %d bytes, want 32", len(seed))
	}
	alg := map[byte]Algorithm{sigTypeEd25519: Ed25519, sigTypeCosignatureEd25519: CosignatureEd25519, sigTypeCosignatureMLDSA44: CosignatureMLDSA44}
	a, ok := alg[typ]
	if !ok {
		return nil, "", fmt.Errorf("unknown signature type 0x%02x", typ)
	}
	_, vkey, err := KeyFromSeed(name, a, [32]byte(seed))
	if err != nil {
		return nil, "", err
	}
	signer, err := NewSigner(skey, now)
	if err != nil {
		return nil, "", err
	}
	return signer, vkey, nil
}

func keyType(vkey string) byte {
	_, typ, _, _, err := splitKey(vkey)
	if err != nil {
		return 0
	}
	return typ
}

// Err returns the error of Run's latest integration attempt, or nil if it
// succeeded (or none was made yet): while it is set, entries are appended
// but not anchored, and a readiness check reports the log as unwritable.
func (l *Log) Err() error {
	if p := l.runErr.Load(); p != nil {
		return *p
	}
	return nil
}

// Origin returns the checkpoint origin line.
func (l *Log) Origin() string { return l.origin }

// VerifierKeys returns the verifier keys of the log's signatures, Ed25519
// first, one per line for `acsledger log-key`.
func (l *Log) VerifierKeys() []string { return append([]string(nil), l.vkeys...) }

// Verifiers returns the log's keys as note verifiers.
func (l *Log) Verifiers() note.Verifiers { return l.verifiers }

// reload rebuilds the integrator state from storage.
func (l *Log) reload(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	rng, tails, err := l.loadState(ctx)
	if err != nil {
		return err
	}
	l.rng, l.tails = rng, tails
	return nil
}

// loadState reads the integrator state from storage: the compact range of
// the whole tree and the hashes of every level's incomplete tile.
func (l *Log) loadState(ctx context.Context) (*compact.Range, [][]byte, error) {
	size, err := l.s.Size(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("couldn't read the log size: %w", err)
	}
	r := &treeReader{s: l.s, size: size}
	rng, err := r.compactRange(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("couldn't rebuild the tree edge at size %d: %w", size, err)
	}
	tails := make([][]byte, 0, maxTileLevel+1)
	for level := 0; levelWidth(size, level) > 0; level++ {
		w := levelWidth(size, level)
		var t []byte
		if w%TileWidth != 0 {
			t, err = r.tileHashes(ctx, level, w/TileWidth, int(w%TileWidth))
			if err != nil {
				return nil, nil, err
			}
		}
		tails = append(tails, append(make([]byte, 0, TileWidth*HashSize), t...))
	}
	return rng, tails, nil
}

// Notify wakes the integrator early, e.g. right after an append committed.
// It never blocks.
func (l *Log) Notify() {
	select {
	case l.notify <- struct{}{}:
	default:
	}
}

// Run integrates pending entries and signs checkpoints until ctx ends, and
// asks the configured witnesses to cosign each new checkpoint. It returns
// ctx's error, or the first ErrInconsistent (after which nothing is signed).
func (l *Log) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if len(l.witnesses) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.runWitnessing(ctx)
		}()
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	limit := l.batch
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
		case <-l.notify:
		}
		var more bool
		var err error
		if limit == l.batch {
			var n int
			n, err = l.integrate(ctx, limit)
			more = n == limit
		} else {
			cctx, span := startCatchUp(ctx, limit)
			more, err = l.catchUp(cctx, limit)
			endSpan(span, err)
		}
		if err != nil && ctx.Err() == nil {
			l.runErr.Store(&err)
		} else if err == nil {
			l.runErr.Store(nil)
		}
		switch {
		case errors.Is(err, ErrInconsistent):
			l.log.Error("merkle log stopped", "err", err)
			return err
		case err != nil && ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			l.log.Warn("merkle log integration failed, retrying", "err", err)
		}
		if more {
			// More is waiting: take it in large batches until caught up.
			limit = l.backlog
			timer.Reset(0)
		} else {
			limit = l.batch
			timer.Reset(l.delay)
		}
	}
}

// Integrate sequences one batch of pending entries in one storage
// transaction and then signs a checkpoint for the new tree. It returns how
// many leaves it added.
func (l *Log) Integrate(ctx context.Context) (int, error) {
	return l.integrate(ctx, l.batch)
}

// integrate is Integrate with up to limit leaves.
func (l *Log) integrate(ctx context.Context, limit int) (n int, err error) {
	n, ictx, span, err := l.integrateBatch(ctx, limit)
	defer func() { endSpan(span, err) }()
	if err != nil {
		return 0, err
	}
	if n == 0 && !l.unsigned() {
		return 0, nil
	}
	// Also when nothing was added: a previous signing may have failed.
	return n, l.signIfBehind(ictx)
}

// unsigned reports whether the integrated tree is larger than the last
// checkpoint this Log stored or found.
func (l *Log) unsigned() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rng == nil || l.rng.End() != l.signedSize
}

// integrateBatch stores up to limit pending leaves. When it found some it
// opens the integration's span, which the caller ends, and returns ctx
// under it; otherwise the span records nothing.
func (l *Log) integrateBatch(ctx context.Context, limit int) (int, context.Context, trace.Span, error) {
	var span trace.Span = noop.Span{}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rng == nil {
		if l.dirty(ctx); l.rng == nil {
			return 0, ctx, span, errors.New("tlog: integrator state could not be rebuilt")
		}
	}
	b, err := l.prepare(ctx, 0, limit)
	if err != nil {
		l.dirty(ctx)
		return 0, ctx, span, err
	}
	if len(b.leaves) == 0 {
		return 0, ctx, span, nil
	}
	ctx, span = startIntegrate(ctx, b.start, len(b.leaves))
	if err := l.store(ctx, b); err != nil {
		l.dirty(ctx)
		return 0, ctx, span, err
	}
	return len(b.leaves), ctx, span, nil
}

// batch is a run of leaves hashed into the integrator state, to be stored.
type batch struct {
	start  uint64
	leaves []StoredLeaf
	tiles  []FullTile
	lastID int64  // the highest entry id in leaves
	root   []byte // the tree root after leaves
}

// prepare reads up to limit pending entries with ids above after and
// extends the in-memory tree with their leaves. The caller holds l.mu and,
// on error, must rebuild the state with dirty once no store is in flight.
func (l *Log) prepare(ctx context.Context, after int64, limit int) (*batch, error) {
	pending, err := l.s.Pending(ctx, after, limit)
	if err != nil || len(pending) == 0 {
		return &batch{}, err
	}
	b := &batch{start: l.rng.End(), leaves: make([]StoredLeaf, len(pending))}
	var visitErr error
	visit := func(id compact.NodeID, hash []byte) {
		if id.Level%TileHeight != 0 {
			return
		}
		level := int(id.Level / TileHeight)
		if level >= len(l.tails) {
			l.tails = append(l.tails, make([]byte, 0, TileWidth*HashSize))
		}
		if got, want := uint64(len(l.tails[level])/HashSize), id.Index%TileWidth; got != want {
			visitErr = fmt.Errorf("tile edge at level %d holds %d hashes, node index %d needs %d", level, got, id.Index, want)
			return
		}
		l.tails[level] = append(l.tails[level], hash...)
		if len(l.tails[level]) == TileWidth*HashSize {
			t := FullTile{Level: level, N: id.Index / TileWidth, Data: l.tails[level]}
			copy(t.Root[:], subtreeHash(t.Data))
			b.tiles = append(b.tiles, t)
			l.tails[level] = make([]byte, 0, TileWidth*HashSize)
		}
	}
	for i, p := range pending {
		data, err := p.Leaf.MarshalJCS()
		if err != nil {
			// A leaf we cannot encode would stop the log forever; it is
			// a ledger bug, reported with the entry it came from.
			return nil, fmt.Errorf("entry %d: %w", p.EntryID, err)
		}
		b.leaves[i] = StoredLeaf{EntryID: p.EntryID, EntryHash: p.Leaf.EntryHash, SessionID: p.Leaf.SessionID, Data: data}
		b.lastID = max(b.lastID, p.EntryID)
		h := LeafHash(data)
		if err := l.rng.Append(h[:], visit); err != nil || visitErr != nil {
			return nil, fmt.Errorf("couldn't extend the tree: %w", errors.Join(err, visitErr))
		}
	}
	if b.root, err = l.rng.GetRootHash(nil); err != nil {
		return nil, err
	}
	return b, nil
}

// store writes a prepared batch in one storage transaction.
func (l *Log) store(ctx context.Context, b *batch) error {
	if err := l.s.Integrate(ctx, b.start, b.leaves, b.tiles); err != nil {
		return fmt.Errorf("couldn't store leaves %d..%d: %w", b.start, b.start+uint64(len(b.leaves))-1, err)
	}
	integratedTreeSize.Record(ctx, int64(b.start)+int64(len(b.leaves)))
	return nil
}

// catchUpBatches bounds one catch-up: entries that commit late with an id
// below the ones being integrated wait at most this many batches.
const catchUpBatches = 8

// catchUp integrates a backlog in batches of up to limit leaves, each
// stored in one transaction and followed by a signed checkpoint, until a
// batch comes back short or catchUpBatches were stored. While a batch is
// being stored the next one is read (entries above the stored batch's
// highest id) and hashed, and while that one is stored the checkpoint for
// the first is signed, so database and CPU work overlap. The first
// batch reads the queue from its start, so late commits are not skipped;
// Storage.Integrate refuses a batch whose entries are not all pending, so an
// overlap can never give an entry two leaves. more reports that the last
// batch was full.
func (l *Log) catchUp(ctx context.Context, limit int) (more bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rng == nil {
		if l.dirty(ctx); l.rng == nil {
			return false, errors.New("tlog: integrator state could not be rebuilt")
		}
	}
	cur, err := l.prepare(ctx, 0, limit)
	if err != nil {
		l.dirty(ctx)
		return false, err
	}
	if len(cur.leaves) == 0 {
		return false, nil
	}
	storing := l.storeAsync(ctx, cur)
	for i := 1; ; i++ {
		next, nextErr := &batch{}, error(nil)
		if len(cur.leaves) == limit && i < catchUpBatches {
			next, nextErr = l.prepare(ctx, cur.lastID, limit)
		}
		if err := <-storing; err != nil {
			l.dirty(ctx)
			return false, err
		}
		more = len(cur.leaves) == limit
		storing = nil
		if nextErr == nil && len(next.leaves) > 0 {
			storing = l.storeAsync(ctx, next) // overlaps the signing of cur
		}
		if err := l.signLocked(ctx, cur.start+uint64(len(cur.leaves)), cur.root); err != nil {
			if storing != nil {
				<-storing
			}
			l.dirty(ctx)
			return false, err
		}
		if nextErr != nil {
			l.dirty(ctx)
			return false, nextErr
		}
		if storing == nil {
			return more, nil
		}
		cur = next
	}
}

// storeAsync stores b in a goroutine; the channel receives the result.
func (l *Log) storeAsync(ctx context.Context, b *batch) <-chan error {
	done := make(chan error, 1)
	go func() { done <- l.store(ctx, b) }()
	return done
}

// dirty throws away integrator state after a failed batch; it is rebuilt
// from storage so nothing half-applied survives in memory. Until that
// succeeds the state stays marked and the next batch retries the reload.
func (l *Log) dirty(ctx context.Context) {
	rng, tails, err := l.loadState(context.WithoutCancel(ctx))
	if err != nil {
		l.log.Warn("couldn't rebuild the tree after a failed batch", "err", err)
		l.rng = nil
		return
	}
	l.rng, l.tails = rng, tails
}

// latest returns the latest stored checkpoint, verified with the log's
// keys; ok is false before the first.
func (l *Log) latest(ctx context.Context) (cp Checkpoint, signed []byte, ok bool, err error) {
	signed, err = l.s.LatestCheckpoint(ctx)
	if errors.Is(err, ErrNotFound) {
		return cp, nil, false, nil
	}
	if err != nil {
		return cp, nil, false, fmt.Errorf("couldn't read the latest checkpoint: %w", err)
	}
	cp, err = l.openCheckpoint(signed)
	if err != nil {
		return cp, nil, false, fmt.Errorf("%w: stored latest checkpoint: %v", ErrInconsistent, err)
	}
	return cp, signed, true, nil
}

// openCheckpoint verifies a checkpoint note with every log key. The last
// verified note is remembered, since every tile request reads the latest.
func (l *Log) openCheckpoint(signed []byte) (Checkpoint, error) {
	l.lastMu.Lock()
	if bytes.Equal(l.lastSigned, signed) {
		cp := l.lastCP
		l.lastMu.Unlock()
		return cp, nil
	}
	l.lastMu.Unlock()
	cp, err := l.verifyCheckpoint(signed)
	if err != nil {
		return cp, err
	}
	l.lastMu.Lock()
	l.lastSigned, l.lastCP = bytes.Clone(signed), cp
	l.lastMu.Unlock()
	return cp, nil
}

func (l *Log) verifyCheckpoint(signed []byte) (Checkpoint, error) {
	n, err := note.Open(signed, l.verifiers)
	if err != nil {
		return Checkpoint{}, err
	}
	// The Ed25519 key must have signed. Other log keys may be missing (a
	// post-quantum key added later did not sign older checkpoints), but
	// note.Open has already refused any of their signatures that is bad.
	primary := false
	for _, sig := range n.Sigs {
		primary = primary || (sig.Name == l.signers[0].Name() && sig.Hash == l.signers[0].KeyHash())
	}
	if !primary {
		return Checkpoint{}, errors.New("checkpoint lacks the log's Ed25519 signature")
	}
	cp, err := ParseCheckpoint([]byte(n.Text))
	if err != nil {
		return cp, err
	}
	if cp.Origin != l.origin {
		return cp, fmt.Errorf("checkpoint origin %q, want %q", cp.Origin, l.origin)
	}
	return cp, nil
}

// signIfBehind signs a checkpoint for the stored tree if the latest
// checkpoint is smaller. Before signing it recomputes, from stored tiles and
// leaves (not from memory), the new root and a consistency proof from the
// latest checkpoint, and refuses with ErrInconsistent if they disagree.
func (l *Log) signIfBehind(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rng == nil {
		return errors.New("tlog: integrator state could not be rebuilt")
	}
	mem, err := l.rng.GetRootHash(nil)
	if err != nil {
		return err
	}
	ctx, span := startSign(ctx, l.rng.End())
	err = l.signLocked(ctx, l.rng.End(), mem)
	endSpan(span, err)
	return err
}

// signLocked is signIfBehind for the stored tree of size, whose root the
// integrator computed as mem (nil for the empty tree). The caller holds l.mu.
func (l *Log) signLocked(ctx context.Context, size uint64, mem []byte) error {
	old, _, hasOld, err := l.latest(ctx)
	if err != nil {
		return err
	}
	r := &treeReader{s: l.s, size: size, cache: l.cache}
	root, err := r.root(ctx)
	if err != nil {
		return fmt.Errorf("couldn't compute the root at size %d: %w", size, err)
	}
	if size > 0 && !bytes.Equal(mem, root[:]) {
		return fmt.Errorf("%w: stored tree root at size %d differs from the integrator's", ErrInconsistent, size)
	}
	if hasOld {
		switch {
		case old.Size > size:
			return fmt.Errorf("%w: checkpoint is for %d leaves but storage holds %d", ErrInconsistent, old.Size, size)
		case old.Size == size:
			if old.Root != root {
				return fmt.Errorf("%w: stored tree at size %d has a different root than its checkpoint", ErrInconsistent, size)
			}
			l.signedSize = size
			return nil
		}
		p, err := r.consistency(ctx, old.Size)
		if err != nil {
			return fmt.Errorf("couldn't prove consistency %d..%d: %w", old.Size, size, err)
		}
		if err := proof.VerifyConsistency(hasher, old.Size, size, p, old.Root[:], root[:]); err != nil {
			return fmt.Errorf("%w: %v", ErrInconsistent, err)
		}
	} else if size == 0 {
		return nil // nothing to sign yet
	}
	cp := Checkpoint{Origin: l.origin, Size: size, Root: root}
	signed, err := note.Sign(&note.Note{Text: string(cp.Marshal())}, l.signers...)
	if err != nil {
		return fmt.Errorf("couldn't sign checkpoint %d: %w", size, err)
	}
	if err := l.s.SwapCheckpoint(ctx, hasOld, old.Size, size, signed); err != nil {
		return fmt.Errorf("couldn't store checkpoint %d: %w", size, err)
	}
	l.signedSize = size
	if l.policy == nil && l.publish != "" {
		if err := publishCheckpoint(l.publish, size, signed); err != nil {
			l.log.Error("couldn't publish checkpoint", "size", size, "err", err)
		}
	}
	recordSigned(ctx, size)
	if l.policy == nil {
		recordPublished(ctx, size)
	}
	if l.onCP != nil {
		l.onCP(cp)
	}
	select {
	case l.signed <- struct{}{}:
	default:
	}
	return nil
}

// Checkpoint returns the latest published checkpoint (the latest signed
// one, or with a witness policy the latest that satisfies it) with the
// witness cosignatures stored for it appended; ErrNotFound before the
// first.
func (l *Log) Checkpoint(ctx context.Context) ([]byte, error) {
	if l.policy != nil {
		return l.publishedCheckpoint(ctx)
	}
	signed, err := l.s.LatestCheckpoint(ctx)
	if err != nil {
		return nil, err
	}
	cp, err := l.openCheckpoint(signed)
	if err != nil {
		return nil, fmt.Errorf("%w: stored latest checkpoint: %v", ErrInconsistent, err)
	}
	return l.withCosignatures(ctx, signed, cp.Size)
}

// withCosignatures returns the checkpoint note signed, for a tree of size,
// with the witness cosignatures stored for it appended.
func (l *Log) withCosignatures(ctx context.Context, signed []byte, size uint64) ([]byte, error) {
	lines, err := l.s.Cosignatures(ctx, size)
	if err != nil {
		return nil, err
	}
	out := append([]byte(nil), signed...)
	for _, line := range lines {
		out = append(out, line...)
	}
	return out, nil
}

// LatestCheckpoint returns the parsed latest published checkpoint (with
// a witness policy, the latest whose cosignatures satisfy it; otherwise
// the latest signed); ErrNotFound before the first.
func (l *Log) LatestCheckpoint(ctx context.Context) (Checkpoint, error) {
	cp, _, err := l.servedSize(ctx)
	return cp, err
}

// servedSize is latestSize for what the log shows the world: with a
// witness policy the published checkpoint, which may lag the signed one.
func (l *Log) servedSize(ctx context.Context) (Checkpoint, []byte, error) {
	if l.policy == nil {
		return l.latestSize(ctx)
	}
	l.pubMu.Lock()
	pub := l.pub
	l.pubMu.Unlock()
	if !pub.ok {
		return Checkpoint{}, nil, fmt.Errorf("%w: no checkpoint has satisfied the witness policy yet", ErrNotFound)
	}
	return pub.cp, pub.signed, nil
}

// latestSize returns the latest checkpoint, ErrNotFound before the first.
func (l *Log) latestSize(ctx context.Context) (Checkpoint, []byte, error) {
	cp, signed, ok, err := l.latest(ctx)
	if err != nil {
		return cp, nil, err
	}
	if !ok {
		return Checkpoint{}, nil, fmt.Errorf("%w: no checkpoint signed yet", ErrNotFound)
	}
	return cp, signed, nil
}

// Tile returns tile (level, n) at width (256 for a full tile) or, for level
// [EntriesLevel], the entry bundle, as covered by the latest checkpoint.
// Anything beyond that checkpoint is ErrNotFound.
func (l *Log) Tile(ctx context.Context, level int, n uint64, width int) ([]byte, error) {
	cp, _, err := l.servedSize(ctx)
	if err != nil {
		return nil, err
	}
	if level == EntriesLevel {
		avail := cp.Size
		if n > avail/TileWidth || n*TileWidth+uint64(width) > avail {
			return nil, fmt.Errorf("%w: entry bundle %d width %d is beyond the checkpoint size %d", ErrNotFound, n, width, cp.Size)
		}
		leaves, err := l.s.Leaves(ctx, n*TileWidth, n*TileWidth+uint64(width))
		if err != nil {
			return nil, err
		}
		var b []byte
		for _, leaf := range leaves {
			if b, err = AppendBundleEntry(b, leaf); err != nil {
				return nil, err
			}
		}
		return b, nil
	}
	r := &treeReader{s: l.s, size: cp.Size, cache: l.cache}
	return r.tileHashes(ctx, level, n, width)
}

// InclusionProof returns the RFC 6962 inclusion proof of leaf index in the
// tree of size, which must not exceed the latest checkpoint.
func (l *Log) InclusionProof(ctx context.Context, index, size uint64) ([][]byte, error) {
	cp, _, err := l.servedSize(ctx)
	if err != nil {
		return nil, err
	}
	if size > cp.Size || index >= size {
		return nil, fmt.Errorf("%w: leaf %d in a tree of %d (checkpoint size %d)", ErrBadRange, index, size, cp.Size)
	}
	r := &treeReader{s: l.s, size: size, cache: l.cache}
	return r.inclusion(ctx, index)
}

// ConsistencyProof returns the RFC 6962 consistency proof between two tree
// sizes, the larger not beyond the latest checkpoint.
func (l *Log) ConsistencyProof(ctx context.Context, oldSize, newSize uint64) ([][]byte, error) {
	cp, _, err := l.servedSize(ctx)
	if err != nil {
		return nil, err
	}
	if oldSize > newSize || newSize > cp.Size {
		return nil, fmt.Errorf("%w: sizes %d..%d (checkpoint size %d)", ErrBadRange, oldSize, newSize, cp.Size)
	}
	r := &treeReader{s: l.s, size: newSize, cache: l.cache}
	return r.consistency(ctx, oldSize)
}

// EntryProof is the c2sp.org/tlog-proof@v1 document for the entry at
// position of session against the latest checkpoint (with its stored
// cosignatures), and the leaf index.
func (l *Log) EntryProof(ctx context.Context, sessionID string, position int64) ([]byte, uint64, error) {
	index, err := l.s.LeafIndexByPosition(ctx, sessionID, position)
	if err != nil {
		return nil, 0, err
	}
	signed, err := l.Checkpoint(ctx)
	if err != nil {
		return nil, 0, err
	}
	cp, err := l.openCheckpoint(signed)
	if err != nil {
		return nil, 0, err
	}
	if index >= cp.Size {
		return nil, 0, fmt.Errorf("%w: leaf %d is not yet covered by checkpoint %d", ErrNotFound, index, cp.Size)
	}
	r := &treeReader{s: l.s, size: cp.Size, cache: l.cache}
	p, err := r.inclusion(ctx, index)
	if err != nil {
		return nil, 0, err
	}
	return FormatProof(index, p, signed), index, nil
}

// FirstAnchor is where the log first anchored one leaf: the checkpoint
// that first covered it, with the witness cosignatures stored for it, and
// the leaf's inclusion proof in that checkpoint's tree.
type FirstAnchor struct {
	Index      uint64
	Size       uint64
	Checkpoint []byte
	Proof      [][]byte
}

// FirstAnchorOf returns the first anchor of the entry at position of
// session: the smallest signed tree holding its leaf. A receipt built on it
// never changes as the log grows, whichever time it is asked for. The
// error wraps ErrNotFound while the entry has no leaf or no checkpoint
// covers it yet.
func (l *Log) FirstAnchorOf(ctx context.Context, sessionID string, position int64) (FirstAnchor, error) {
	index, err := l.s.LeafIndexByPosition(ctx, sessionID, position)
	if err != nil {
		return FirstAnchor{}, err
	}
	return l.FirstAnchorAt(ctx, index)
}

// FirstAnchorAt is FirstAnchorOf for the leaf at index.
func (l *Log) FirstAnchorAt(ctx context.Context, index uint64) (FirstAnchor, error) {
	size, signed, err := l.s.FirstCheckpointCovering(ctx, index)
	if err != nil {
		return FirstAnchor{}, err
	}
	if l.policy != nil {
		// Only a published checkpoint anchors a receipt (published.go).
		if size, signed, err = l.firstPublishedCovering(ctx, index, size, signed); err != nil {
			return FirstAnchor{}, err
		}
	}
	// Not openCheckpoint: an old checkpoint must not evict the latest
	// from the cache every tile request reads.
	cp, err := l.verifyCheckpoint(signed)
	if err != nil {
		return FirstAnchor{}, fmt.Errorf("%w: stored checkpoint %d: %v", ErrInconsistent, size, err)
	}
	if cp.Size != size || index >= size {
		return FirstAnchor{}, fmt.Errorf("%w: checkpoint stored for size %d is for %d leaves", ErrInconsistent, size, cp.Size)
	}
	withCosigs, err := l.withCosignatures(ctx, signed, size)
	if err != nil {
		return FirstAnchor{}, err
	}
	r := &treeReader{s: l.s, size: size, cache: l.cache}
	p, err := r.inclusion(ctx, index)
	if err != nil {
		return FirstAnchor{}, fmt.Errorf("couldn't prove leaf %d in the tree of size %d: %w", index, size, err)
	}
	return FirstAnchor{Index: index, Size: size, Checkpoint: withCosigs, Proof: p}, nil
}

// BatchDelay is the longest a new entry waits before the integrator takes
// it into the tree: what a client told "not yet anchored" should wait.
func (l *Log) BatchDelay() time.Duration { return l.delay }

// LeafIndexByEntryHash finds the leaf that commits to an entry_hash.
func (l *Log) LeafIndexByEntryHash(ctx context.Context, h [HashSize]byte) (uint64, error) {
	return l.s.LeafIndexByEntryHash(ctx, h)
}

// FormatProof writes a c2sp.org/tlog-proof@v1 document without extra
// data: header, "index N", the inclusion proof hashes in base64 one per
// line, an empty line, then the checkpoint verbatim. A receipt is the same
// document with the entry as extra data (verify.FormatReceipt).
func FormatProof(index uint64, inclusion [][]byte, checkpoint []byte) []byte {
	return verify.FormatReceipt(nil, index, inclusion, checkpoint)
}

// VerifierKeysFor returns the origin and the verifier keys (one per line of
// `acsledger log-key`) for a configuration's signer keys, without opening
// storage. It applies the same checks as [New].
func VerifierKeysFor(cfg Config) (origin string, vkeys []string, err error) {
	if len(cfg.Keys) == 0 {
		return "", nil, errors.New("tlog: no signing key")
	}
	for i, k := range cfg.Keys {
		signer, vkey, err := signerAndVerifierKey(k, time.Now)
		if err != nil {
			return "", nil, fmt.Errorf("tlog: key %d: %w", i, err)
		}
		if signer.Name() != cfg.Origin {
			return "", nil, fmt.Errorf("tlog: key %d is named %q, want the origin %q", i, signer.Name(), cfg.Origin)
		}
		vkeys = append(vkeys, vkey)
	}
	return cfg.Origin, vkeys, nil
}

// LoggedLeaf is a leaf the log holds, with its index in the tree.
type LoggedLeaf struct {
	Index uint64
	Leaf
}

// sessionLeavesPage is how many leaves SessionLeaves reads at a time.
const sessionLeavesPage = 1000

// SessionLeaves yields every leaf the log holds for sessionID, in index
// order, which is the session's chain order: the leaves the entries of the
// session were given, whether or not the store still holds those entries.
// A leaf whose data does not parse, or names another session, is an error
// wrapping ErrInconsistent, and ends the sequence.
func (l *Log) SessionLeaves(ctx context.Context, sessionID string) iter.Seq2[LoggedLeaf, error] {
	return func(yield func(LoggedLeaf, error) bool) {
		var from uint64
		for {
			page, err := l.s.SessionLeaves(ctx, sessionID, from, math.MaxUint64, sessionLeavesPage)
			if err != nil {
				yield(LoggedLeaf{}, err)
				return
			}
			for _, il := range page {
				ll, err := parseSessionLeaf(il, sessionID)
				if !yield(ll, err) || err != nil {
					return
				}
			}
			if len(page) < sessionLeavesPage {
				return
			}
			from = page[len(page)-1].Index + 1
		}
	}
}

// LastSessionLeaf returns the leaf of sessionID with the highest index
// below size (the tree size of a checkpoint): the session's last leaf that
// checkpoint covers. ErrNotFound if it covers none.
func (l *Log) LastSessionLeaf(ctx context.Context, sessionID string, size uint64) (LoggedLeaf, error) {
	il, err := l.s.LastSessionLeaf(ctx, sessionID, size)
	if err != nil {
		return LoggedLeaf{}, err
	}
	return parseSessionLeaf(il, sessionID)
}

func parseSessionLeaf(il IndexedLeaf, sessionID string) (LoggedLeaf, error) {
	leaf, err := ParseLeaf(il.Data)
	if err != nil {
		return LoggedLeaf{}, fmt.Errorf("%w: leaf %d: %v", ErrInconsistent, il.Index, err)
	}
	if leaf.SessionID != sessionID {
		return LoggedLeaf{}, fmt.Errorf("%w: leaf %d, found for session %q, names session %q", ErrInconsistent, il.Index, sessionID, leaf.SessionID)
	}
	return LoggedLeaf{Index: il.Index, Leaf: leaf}, nil
}

// CheckpointAt returns the checkpoint signed at size, with the witness
// cosignatures stored for it appended; ErrNotFound if none was signed at
// that size.
func (l *Log) CheckpointAt(ctx context.Context, size uint64) ([]byte, error) {
	if l.policy != nil {
		cp, _, err := l.servedSize(ctx)
		if err != nil {
			return nil, err
		}
		if size > cp.Size {
			return nil, fmt.Errorf("%w: checkpoint %d is not published (the witness policy is satisfied up to %d)", ErrNotFound, size, cp.Size)
		}
	}
	signed, err := l.s.Checkpoint(ctx, size)
	if err != nil {
		return nil, err
	}
	return l.withCosignatures(ctx, signed, size)
}
