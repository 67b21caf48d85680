package guardian

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestEvalPoolBoundsConcurrency: however many callers, at most the pool's
// workers evaluate at once, all of them do when there is work, and every
// job runs exactly once.
func TestEvalPoolBoundsConcurrency(t *testing.T) {
	const workers, jobs = 3, 40
	p := newEvalPool(workers)
	var running, peak, ran atomic.Int32
	full := make(chan struct{}) // closed once all workers run at once
	var once sync.Once
	var wg sync.WaitGroup
	for range jobs {
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
				if n == workers {
					once.Do(func() { close(full) })
				}
				// The first jobs wait until every worker is busy, so
				// the pool is seen full; later ones pass straight on.
				select {
				case <-full:
				case <-time.After(5 * time.Second):
				}
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
	if got := ran.Load(); got != jobs {
		t.Errorf("%d jobs ran, want %d", got, jobs)
	}
	if got := peak.Load(); got != workers {
		t.Errorf("at most %d ran at once, want exactly %d", got, workers)
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
