package guardian

import (
	"context"
	"time"
)

// evalPool runs policy evaluations on a few long-lived goroutines.
//
// OPA's evaluator recurses deeply. Run on the HTTP server's per-connection
// goroutines, whose stacks the garbage collector shrinks while they wait
// for the next request, every evaluation first grew its stack again, by
// copying (runtime.copystack was about 7% of the Guardian's CPU under the
// 64-session load of BenchmarkGuardianToolCall). A worker keeps its grown
// stack from one evaluation to the next, and a bounded number of them
// keeps more evaluations from running at once than the cores can serve.
//
// Workers start on demand and end after evalPoolIdle without work, so an
// idle Guardian holds no goroutines and needs no Close.
type evalPool struct {
	jobs  chan func()
	slots chan struct{}
}

const evalPoolIdle = 10 * time.Second

func newEvalPool(workers int) *evalPool {
	return &evalPool{jobs: make(chan func()), slots: make(chan struct{}, workers)}
}

// run hands f to a worker and returns once a worker has taken it, or with
// ctx's error if ctx ends first. The caller waits for f's result itself.
func (p *evalPool) run(ctx context.Context, f func()) error {
	select {
	case p.jobs <- f: // an idle worker took it
		return nil
	default:
	}
	select {
	case p.jobs <- f:
		return nil
	case p.slots <- struct{}{}:
		go p.work(f)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *evalPool) work(f func()) {
	defer func() { <-p.slots }()
	idle := time.NewTimer(evalPoolIdle)
	defer idle.Stop()
	for {
		f()
		idle.Reset(evalPoolIdle)
		select {
		case f = <-p.jobs:
		case <-idle.C:
			return
		}
	}
}
