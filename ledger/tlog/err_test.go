package tlog

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// failingStorage is memStorage whose Pending fails while down is set, as
// a database that went away does.
type failingStorage struct {
	*memStorage
	down atomic.Bool
}

var errDown = errors.New("database down")

func (f *failingStorage) Pending(ctx context.Context, after int64, limit int) ([]PendingEntry, error) {
	if f.down.Load() {
		return nil, errDown
	}
	return f.memStorage.Pending(ctx, after, limit)
}

// TestErrFollowsRun: Err reports the failure of Run's latest integration
// while the storage fails, and nil again once an integration succeeds,
// which is what serve's /readyz reads.
func TestErrFollowsRun(t *testing.T) {
	t.Parallel()
	s := &failingStorage{memStorage: newMemStorage()}
	l := newTestLog(t, Storage{Writer: s, Reader: s}, Config{BatchDelay: 5 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: Err() = %v", what, l.Err())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if err := l.Err(); err != nil {
		t.Fatalf("Err before any failure: %v", err)
	}
	s.down.Store(true)
	waitFor("storage down", func() bool { return errors.Is(l.Err(), errDown) })
	s.down.Store(false)
	s.addPending(0, 3)
	l.Notify()
	waitFor("storage back", func() bool { return l.Err() == nil })
}
