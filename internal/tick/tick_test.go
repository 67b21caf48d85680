package tick

import (
	"context"
	"testing"
	"time"
)

// TestEvery: f runs on ticks and on wakes, and Every returns once ctx ends.
func TestEvery(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	wake := make(chan struct{})
	calls := make(chan struct{}, 10)
	done := make(chan struct{})
	go func() {
		Every(ctx, time.Hour, wake, func() { calls <- struct{}{} })
		close(done)
	}()
	wake <- struct{}{}
	<-calls
	cancel()
	<-done

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	go Every(ctx, time.Millisecond, nil, func() {
		select {
		case calls <- struct{}{}:
		default:
		}
	})
	for range 3 {
		select {
		case <-calls:
		case <-time.After(10 * time.Second):
			t.Fatal("no tick")
		}
	}
}
