// Package tlogpub publishes the public Merkle log to object storage as
// static C2SP tlog-tiles (docs/object-storage.md): the checkpoint, the
// hash tiles and the entry bundles, so auditors read the log from a
// bucket (or a CDN in front of it) with the server gone and without
// touching the database.
//
// Order is the guarantee: every tile a checkpoint needs is written before
// the checkpoint object names it, and the checkpoint object is replaced
// only by one for a larger (or the same, better cosigned) tree that is
// consistent with it. Full tiles and partial tiles are written once
// (conditional create); the checkpoint is the only object ever replaced.
// Publication runs beside the log, reading only what the log has
// published: a store that is down or slow delays publication, never an
// append or a decision.
package tlogpub

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/sync/errgroup"

	"github.com/acsledger/acsledger/ledger/tlog"
)

// Source is what the publisher reads from the log; *tlog.Log is one.
type Source interface {
	// Checkpoint returns the latest published checkpoint with its
	// cosignatures.
	Checkpoint(ctx context.Context) ([]byte, error)
	// Tile returns a tile (or, at tlog.EntriesLevel, an entry bundle)
	// covered by the published checkpoint.
	Tile(ctx context.Context, level int, n uint64, width int) ([]byte, error)
	// ConsistencyProof proves the tree of oldSize a prefix of newSize's.
	ConsistencyProof(ctx context.Context, oldSize, newSize uint64) ([][]byte, error)
	// Verifiers verify the log's checkpoint signatures.
	Verifiers() note.Verifiers
	// Origin is the log's checkpoint origin.
	Origin() string
}

// How objects are served (docs/object-storage.md). Tiles, full or
// partial, never change once written; the checkpoint moves.
var (
	tileObject       = Object{ContentType: "application/octet-stream", CacheControl: "public, max-age=31536000, immutable"}
	checkpointObject = Object{ContentType: "text/plain; charset=utf-8", CacheControl: "public, max-age=5, must-revalidate"}
)

// CheckpointKey is the checkpoint object's key under the prefix.
const CheckpointKey = "checkpoint"

// Config configures a Publisher.
type Config struct {
	// Interval is how often the publisher looks for a new checkpoint when
	// nobody calls Notify (default 1s).
	Interval time.Duration
	// Concurrency is how many objects are written at once (default 8).
	Concurrency int
	// MaxBackoff caps the wait between failed rounds (default 30s; the
	// first retry waits Interval).
	MaxBackoff time.Duration
	// Logger receives failures and catch-ups (default discard).
	Logger *slog.Logger
}

// Publisher writes the log's published checkpoints and their tiles to a
// bucket.
type Publisher struct {
	src    Source
	b      Bucket
	cfg    Config
	log    *slog.Logger
	notify chan struct{}

	mu      sync.Mutex
	ready   bool   // Start has read the bucket
	size    uint64 // size of the checkpoint object in the bucket
	written []byte // the checkpoint object as last read or written
	st      Status
}

// Status is how far publication has come.
type Status struct {
	// Published is the tree size of the checkpoint in the bucket.
	Published uint64
	// Tiles counts the tiles and entry bundles written since start.
	Tiles uint64
	// Failures counts failed rounds since start; LastError is the latest
	// round's error ("" after one that succeeded).
	Failures  uint64
	LastError string
}

// New returns a publisher of src to b. Call Start before Run.
func New(src Source, b Bucket, cfg Config) *Publisher {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 8
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 30 * time.Second
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	return &Publisher{src: src, b: b, cfg: cfg, log: lg, notify: make(chan struct{}, 1)}
}

// Start reads the bucket's checkpoint, if any, and checks that it is this
// log's: signed by its key, of its origin, no larger than the log's
// published tree and consistent with it. A bucket that holds another
// log's checkpoint, or that cannot be read, is refused with an error
// naming it; Start writes nothing.
func (p *Publisher) Start(ctx context.Context) error {
	old, err := p.b.Get(ctx, CheckpointKey)
	if errors.Is(err, ErrNotExist) {
		p.mu.Lock()
		p.ready, p.size, p.written = true, 0, nil
		p.mu.Unlock()
		return nil
	}
	if err != nil {
		return fmt.Errorf("couldn't read the checkpoint in %s: %w", p.b, err)
	}
	cp, err := p.check(ctx, old)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", p.b, CheckpointKey, err)
	}
	p.mu.Lock()
	p.ready, p.size, p.written = true, cp.Size, old
	p.st.Published = cp.Size
	p.mu.Unlock()
	recordPublished(ctx, cp.Size)
	return nil
}

// check verifies a checkpoint found in the bucket against the log.
func (p *Publisher) check(ctx context.Context, signed []byte) (tlog.Checkpoint, error) {
	n, err := note.Open(signed, p.src.Verifiers())
	if err != nil {
		return tlog.Checkpoint{}, fmt.Errorf("not a checkpoint signed by this log's key (another log's bucket?): %v", err)
	}
	cp, err := tlog.ParseCheckpoint([]byte(n.Text))
	if err != nil {
		return cp, fmt.Errorf("malformed checkpoint: %v", err)
	}
	if cp.Origin != p.src.Origin() {
		return cp, fmt.Errorf("checkpoint of origin %q, this log is %q", cp.Origin, p.src.Origin())
	}
	cur, err := p.current(ctx)
	if err != nil {
		return cp, err
	}
	if cp.Size > cur.cp.Size {
		return cp, fmt.Errorf("the bucket's checkpoint is for %d leaves, the log has published %d (a log restored from an older backup, or another database?)", cp.Size, cur.cp.Size)
	}
	pr, err := p.src.ConsistencyProof(ctx, cp.Size, cur.cp.Size)
	if err != nil {
		return cp, fmt.Errorf("couldn't prove consistency %d..%d: %v", cp.Size, cur.cp.Size, err)
	}
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, cp.Size, cur.cp.Size, pr, cp.Root[:], cur.cp.Root[:]); err != nil {
		return cp, fmt.Errorf("the bucket's checkpoint (size %d) is not consistent with the log's (size %d): %v", cp.Size, cur.cp.Size, err)
	}
	return cp, nil
}

type signedCheckpoint struct {
	cp     tlog.Checkpoint
	signed []byte
}

// current is the log's published checkpoint.
func (p *Publisher) current(ctx context.Context) (signedCheckpoint, error) {
	signed, err := p.src.Checkpoint(ctx)
	if err != nil {
		return signedCheckpoint{}, fmt.Errorf("couldn't read the log's checkpoint: %w", err)
	}
	n, err := note.Open(signed, p.src.Verifiers())
	if err != nil {
		return signedCheckpoint{}, fmt.Errorf("the log's checkpoint does not verify: %w", err)
	}
	cp, err := tlog.ParseCheckpoint([]byte(n.Text))
	if err != nil {
		return signedCheckpoint{}, err
	}
	return signedCheckpoint{cp: cp, signed: signed}, nil
}

// Notify asks for a round soon (after a checkpoint is signed). It never
// blocks.
func (p *Publisher) Notify() {
	select {
	case p.notify <- struct{}{}:
	default:
	}
}

// Status returns how far publication has come.
func (p *Publisher) Status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.st
}

// Run publishes until ctx ends: a round every Interval or on Notify, and
// after a failure again with a backoff doubling up to MaxBackoff. Failures
// are logged and counted, never returned: the log goes on without them.
func (p *Publisher) Run(ctx context.Context) error {
	wait := time.Duration(0)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
		case <-p.notify:
			if wait > p.cfg.Interval {
				continue // backing off: the timer decides
			}
		}
		_, err := p.Publish(ctx)
		switch {
		case err == nil:
			wait = p.cfg.Interval
		case ctx.Err() != nil:
			return ctx.Err()
		default:
			wait = min(max(2*wait, p.cfg.Interval), p.cfg.MaxBackoff)
			p.log.Warn("couldn't publish the log to object storage, retrying", "bucket", p.b.String(), "retry_in", wait, "err", err)
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(wait)
	}
}

// Publish runs one round: if the log's published checkpoint is newer than
// the bucket's, it writes every tile and entry bundle the new checkpoint
// needs that the bucket's does not have, and then the checkpoint. It
// returns the tree size of the checkpoint in the bucket.
func (p *Publisher) Publish(ctx context.Context) (uint64, error) {
	size, err := p.publish(ctx)
	p.mu.Lock()
	if err != nil {
		p.st.Failures++
		p.st.LastError = err.Error()
	} else {
		p.st.LastError = ""
	}
	p.mu.Unlock()
	if err != nil {
		recordFailure(ctx)
	}
	return size, err
}

func (p *Publisher) publish(ctx context.Context) (uint64, error) {
	p.mu.Lock()
	ready, size, written := p.ready, p.size, p.written
	p.mu.Unlock()
	if !ready {
		if err := p.Start(ctx); err != nil {
			return 0, err
		}
		p.mu.Lock()
		size, written = p.size, p.written
		p.mu.Unlock()
	}
	cur, err := p.current(ctx)
	if errors.Is(err, tlog.ErrNotFound) {
		return size, nil // nothing signed yet
	}
	if err != nil {
		return size, err
	}
	if cur.cp.Size < size || cur.cp.Size == size && bytes.Equal(cur.signed, written) {
		return size, nil
	}
	if err := p.writeTiles(ctx, size, cur.cp.Size); err != nil {
		return size, err
	}
	// The checkpoint object is replaced only by a larger consistent one:
	// if it is no longer what this publisher wrote or read, another
	// writer has been at the bucket; check it again before replacing it.
	now, err := p.b.Get(ctx, CheckpointKey)
	switch {
	case errors.Is(err, ErrNotExist) && written == nil:
	case err != nil:
		return size, fmt.Errorf("couldn't read back %s: %w", CheckpointKey, err)
	case !bytes.Equal(now, written):
		other, err := p.check(ctx, now)
		if err != nil {
			return size, fmt.Errorf("%s changed under the publisher: %w", CheckpointKey, err)
		}
		if other.Size > cur.cp.Size {
			return size, fmt.Errorf("%s changed under the publisher to a larger tree (%d > %d)", CheckpointKey, other.Size, cur.cp.Size)
		}
	}
	if err := p.b.Put(ctx, CheckpointKey, cur.signed, checkpointObject); err != nil {
		return size, err
	}
	p.mu.Lock()
	p.size, p.written = cur.cp.Size, cur.signed
	p.st.Published = cur.cp.Size
	p.mu.Unlock()
	recordPublished(ctx, cur.cp.Size)
	return cur.cp.Size, nil
}

// TileRef names one tile or entry bundle.
type TileRef struct {
	Level int
	N     uint64
	Width int
}

// Path is the tile's C2SP path, its key under the prefix.
func (r TileRef) Path() string { return tlog.TilePath(r.Level, r.N, r.Width) }

// NeededTiles lists the tiles and entry bundles that a tree of newSize
// needs and a tree of oldSize (already published) did not: the full tiles
// completed since, and the partial tile of each level at newSize where
// that level grew. Full
// tiles come first, level 0 upward, bundles beside level 0.
func NeededTiles(oldSize, newSize uint64) []TileRef {
	var out []TileRef
	var partial []TileRef
	for level := 0; level <= 7; level++ {
		shift := uint(tlog.TileHeight * level)
		count := newSize >> shift
		if count == 0 {
			break
		}
		oldFull := (oldSize >> shift) / tlog.TileWidth
		full := count / tlog.TileWidth
		for n := oldFull; n < full; n++ {
			out = append(out, TileRef{level, n, tlog.TileWidth})
			if level == 0 {
				out = append(out, TileRef{tlog.EntriesLevel, n, tlog.TileWidth})
			}
		}
		if w := int(count % tlog.TileWidth); w > 0 && oldSize>>shift != count {
			partial = append(partial, TileRef{level, full, w})
			if level == 0 {
				partial = append(partial, TileRef{tlog.EntriesLevel, full, w})
			}
		}
	}
	return append(out, partial...)
}

// writeTiles writes the tiles a tree of newSize needs beyond oldSize's.
// Every one is created only if absent; one that exists must hold the
// same bytes (a retry after a failure), otherwise the bucket holds
// another tree and publication stops with the object's name.
func (p *Publisher) writeTiles(ctx context.Context, oldSize, newSize uint64) error {
	refs := NeededTiles(oldSize, newSize)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(p.cfg.Concurrency)
	for _, r := range refs {
		g.Go(func() error {
			data, err := p.src.Tile(gctx, r.Level, r.N, r.Width)
			if err != nil {
				return fmt.Errorf("couldn't read %s from the log: %w", tlog.TilePath(r.Level, r.N, r.Width), err)
			}
			key := tlog.TilePath(r.Level, r.N, r.Width)
			err = p.b.Create(gctx, key, data, tileObject)
			if errors.Is(err, ErrExists) {
				have, gerr := p.b.Get(gctx, key)
				if gerr != nil {
					return fmt.Errorf("couldn't read back %s: %w", key, gerr)
				}
				if !bytes.Equal(have, data) {
					return fmt.Errorf("%s in %s holds other bytes than the log's tile: the bucket holds another log, or the object was overwritten", key, p.b)
				}
				err = nil
			}
			if err != nil {
				return err
			}
			p.mu.Lock()
			p.st.Tiles++
			p.mu.Unlock()
			recordTile(gctx)
			return nil
		})
	}
	return g.Wait()
}
