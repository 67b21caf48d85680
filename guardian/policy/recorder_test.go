package policy

import (
	"context"
	"fmt"
	"sync"

	"github.com/acsledger/acsledger/ledger"
)

// memRecorder is a test-only Recorder that keeps the ledger's
// PutPolicyBundle contract (idempotent for the same digest, ErrConflict for
// another digest under a recorded ID and version). It stands in until the
// real stores implement ledger.PolicyBundleStore.PutPolicyBundle.
type memRecorder struct {
	mu      sync.Mutex
	bundles map[string]ledger.PolicyBundle
	order   []string
	fail    error
}

func newMemRecorder() *memRecorder {
	return &memRecorder{bundles: map[string]ledger.PolicyBundle{}}
}

func (r *memRecorder) PutPolicyBundle(_ context.Context, b ledger.PolicyBundle) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return r.fail
	}
	if b.Digest != digestOf(b.Content) {
		return fmt.Errorf("digest %s is not the SHA-256 of the content", b.Digest)
	}
	key := b.ID + "@" + b.Version
	if old, ok := r.bundles[key]; ok {
		if old.Digest != b.Digest {
			return fmt.Errorf("policy bundle %s: %w", key, ledger.ErrConflict)
		}
		return nil
	}
	r.bundles[key] = b
	r.order = append(r.order, key)
	return nil
}

func (r *memRecorder) recorded(id, version string) (ledger.PolicyBundle, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.bundles[id+"@"+version]
	return b, ok
}
