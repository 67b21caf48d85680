// Package tick runs a periodic job until its context ends: the ledger's
// scheduled re-verification, the read replica's lag measurement and the
// Merkle log's witness retries.
package tick

import (
	"context"
	"time"
)

// Every calls f every d, and also each time wake receives (a nil wake
// never does), until ctx ends. It does not call f before the first tick
// or wake, and never calls two at once.
func Every(ctx context.Context, d time.Duration, wake <-chan struct{}, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-t.C:
		}
		f()
	}
}
