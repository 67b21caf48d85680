package tlog

import (
	"context"
	"errors"
	"fmt"
)

// Publication under a witness policy (Config.WitnessPolicy). The log signs
// every checkpoint as before, but shows the world only the latest one
// whose stored cosignatures satisfy the policy: /checkpoint, proofs,
// tiles, receipts and bundles all stop at it, so no checkpoint goes out
// that the policy's witnesses have not seen. When a witness is down the
// published checkpoint stays where it is while the log keeps integrating
// and signing; the lag is in the metrics and in Publication.

// published is the checkpoint the policy was last satisfied for.
type published struct {
	ok     bool
	cp     Checkpoint
	signed []byte // as the log signed it, without cosignatures
}

// publishSearchLimit bounds how many cosigned checkpoints below the latest
// New looks at to find the published one after a restart.
const publishSearchLimit = 1024

// loadPublished finds, at start, the latest checkpoint whose stored
// cosignatures satisfy the policy: the latest signed one, or else the
// largest cosigned one below it that does.
func (l *Log) loadPublished(ctx context.Context) error {
	if l.policy == nil {
		return nil
	}
	cp, signed, ok, err := l.latest(ctx)
	if err != nil || !ok {
		return err
	}
	if ok, err := l.satisfied(ctx, cp.Size, signed); err != nil || ok {
		if ok {
			l.setPublished(ctx, cp, signed)
		}
		return err
	}
	if l.s.Cosigned == nil {
		return nil
	}
	below := cp.Size
	for seen := 0; seen < publishSearchLimit; {
		sizes, err := l.s.Cosigned.CosignedSizes(ctx, below, 128)
		if err != nil {
			return err
		}
		for _, size := range sizes {
			signed, err := l.s.Checkpoint(ctx, size)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			c, err := l.verifyCheckpoint(signed)
			if err != nil {
				return fmt.Errorf("%w: stored checkpoint %d: %v", ErrInconsistent, size, err)
			}
			ok, err := l.satisfied(ctx, size, signed)
			if err != nil {
				return err
			}
			if ok {
				l.setPublished(ctx, c, signed)
				return nil
			}
		}
		if len(sizes) < 128 {
			break
		}
		seen += len(sizes)
		below = sizes[len(sizes)-1]
	}
	l.log.Warn("no stored checkpoint satisfies the witness policy yet; nothing is published until one does")
	return nil
}

// satisfied reports whether the stored cosignatures of the checkpoint of
// size satisfy the policy.
func (l *Log) satisfied(ctx context.Context, size uint64, signed []byte) (bool, error) {
	lines, err := l.s.Cosignatures(ctx, size)
	if err != nil {
		return false, fmt.Errorf("couldn't read the cosignatures of checkpoint %d: %w", size, err)
	}
	return l.policy.Satisfied(signed, lines), nil
}

// updatePublished publishes the latest signed checkpoint if the policy is
// now satisfied for it (after a witnessing round).
func (l *Log) updatePublished(ctx context.Context) {
	if l.policy == nil {
		return
	}
	cp, signed, ok, err := l.latest(ctx)
	if err != nil || !ok {
		return
	}
	l.pubMu.Lock()
	have := l.pub.ok && l.pub.cp.Size >= cp.Size
	l.pubMu.Unlock()
	if have {
		return
	}
	ok, err = l.satisfied(ctx, cp.Size, signed)
	if err != nil {
		l.log.Warn("couldn't check the witness policy", "size", cp.Size, "err", err)
		return
	}
	if !ok {
		l.log.Info("checkpoint not published yet: its cosignatures do not satisfy the witness policy", "size", cp.Size)
		return
	}
	l.setPublished(ctx, cp, signed)
}

// setPublished moves the published checkpoint forward (never back).
func (l *Log) setPublished(ctx context.Context, cp Checkpoint, signed []byte) {
	l.pubMu.Lock()
	if l.pub.ok && l.pub.cp.Size >= cp.Size {
		l.pubMu.Unlock()
		return
	}
	l.pub = published{ok: true, cp: cp, signed: signed}
	l.pubMu.Unlock()
	recordPublished(ctx, cp.Size)
	if l.publish != "" {
		if err := publishCheckpoint(l.publish, cp.Size, signed); err != nil {
			l.log.Error("couldn't publish checkpoint", "size", cp.Size, "err", err)
		}
	}
}

// publishedCheckpoint is Checkpoint under a witness policy: the published
// checkpoint with its stored cosignatures.
func (l *Log) publishedCheckpoint(ctx context.Context) ([]byte, error) {
	cp, signed, err := l.servedSize(ctx)
	if err != nil {
		return nil, err
	}
	return l.withCosignatures(ctx, signed, cp.Size)
}

// Publication is how far the published checkpoint lags the log.
type Publication struct {
	// Policy is true when a witness policy holds publication back.
	Policy bool
	// Published is the size of the published checkpoint (0 before the
	// first), Signed the size of the latest signed one, Integrated the
	// number of leaves stored.
	Published, Signed, Integrated uint64
}

// Publication returns the published, signed and integrated sizes. Without
// a witness policy Published equals Signed.
func (l *Log) Publication(ctx context.Context) (Publication, error) {
	p := Publication{Policy: l.policy != nil}
	size, err := l.s.Size(ctx)
	if err != nil {
		return p, err
	}
	p.Integrated = size
	cp, _, ok, err := l.latest(ctx)
	if err != nil {
		return p, err
	}
	if ok {
		p.Signed = cp.Size
	}
	p.Published = p.Signed
	if l.policy != nil {
		l.pubMu.Lock()
		p.Published = 0
		if l.pub.ok {
			p.Published = l.pub.cp.Size
		}
		l.pubMu.Unlock()
	}
	return p, nil
}

// firstPublishedCovering is, under a witness policy, the smallest
// checkpoint holding leaf index whose cosignatures satisfy the policy and
// that is not past the published one; first (of size) is the smallest
// signed checkpoint holding it. Witnesses cosign the latest checkpoint
// only, so the walk goes down the cosigned sizes from the published one;
// past publishSearchLimit of them the published checkpoint itself is the
// anchor. ErrNotFound while no published checkpoint holds the leaf.
func (l *Log) firstPublishedCovering(ctx context.Context, index, size uint64, first []byte) (uint64, []byte, error) {
	pub, pubSigned, err := l.servedSize(ctx)
	if err != nil {
		return 0, nil, err
	}
	if pub.Size <= index {
		return 0, nil, fmt.Errorf("%w: leaf %d is not yet in a published checkpoint (published size %d)", ErrNotFound, index, pub.Size)
	}
	if size <= pub.Size {
		if ok, err := l.satisfied(ctx, size, first); err != nil || ok {
			return size, first, err
		}
	}
	best, bestSigned := pub.Size, pubSigned
	below := pub.Size
	if l.s.Cosigned == nil {
		return best, bestSigned, nil
	}
	for seen := 0; seen < publishSearchLimit; {
		sizes, err := l.s.Cosigned.CosignedSizes(ctx, below, 128)
		if err != nil {
			return 0, nil, err
		}
		for _, n := range sizes {
			if n <= index {
				return best, bestSigned, nil
			}
			signed, err := l.s.Checkpoint(ctx, n)
			if err != nil {
				return 0, nil, err
			}
			if ok, err := l.satisfied(ctx, n, signed); err != nil {
				return 0, nil, err
			} else if ok {
				best, bestSigned = n, signed
			}
		}
		if len(sizes) < 128 {
			break
		}
		seen += len(sizes)
		below = sizes[len(sizes)-1]
	}
	return best, bestSigned, nil
}
