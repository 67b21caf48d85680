package guardian

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestEvalPoolBoundsConcurrency: however many callers, at most the pool's
// workers evaluate at once, and every job runs exactly once.
func TestEvalPoolBoundsConcurrency(t *testing.T) {
	p := newEvalPool(3)
	var running, peak, ran atomic.Int32
	var wg sync.WaitGroup
	for range 40 {
		wg.Go(func() {
			done := make(chan struct{})
			err := p.run(context.Background(), func() {
				defer close(done)
				n := running.Add(1)
				for {
					old := peak.Load()
					if n <= old || peak.CompareAndSwap(old, n) {
						break
					}
				}
				time.Sleep(2 * time.Millisecond)
				running.Add(-1)
				ran.Add(1)
			})
			if err != nil {
				t.Error(err)
				return
			}
			<-done
		})
	}
	wg.Wait()
	if got := ran.Load(); got != 40 {
		t.Errorf("%d jobs ran, want 40", got)
	}
	if got := peak.Load(); got > 3 || got < 2 {
		t.Errorf("at most %d ran at once, want 2 or 3 with 3 workers", got)
	}
}

// TestEvalPoolContext: a caller whose context ends while every worker is
// busy gets the context's error, and its job never runs.
func TestEvalPoolContext(t *testing.T) {
	p := newEvalPool(1)
	release := make(chan struct{})
	if err := p.run(context.Background(), func() { <-release }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	var ran atomic.Bool
	err := p.run(ctx, func() { ran.Store(true) })
	if err != context.DeadlineExceeded {
		t.Errorf("run = %v, want context.DeadlineExceeded", err)
	}
	close(release)
	time.Sleep(10 * time.Millisecond)
	if ran.Load() {
		t.Error("the job of a caller that gave up ran")
	}
}
