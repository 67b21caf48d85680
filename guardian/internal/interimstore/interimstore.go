// Package interimstore is TEMPORARY test support: it gives a real
// ledger.Store the rest of ledger.GuardianStore until ledger/sqlitestore and
// ledger/pgstore implement it (the Guardian's tests use theirs as soon as
// they do). Entries go to the real store; responses, replay history and
// policy bundles are kept in memory, and AppendSigned is not one
// transaction. Delete this package when both stores implement
// GuardianStore.
package interimstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/acsledger/acsledger/ledger"
)

// Store is a ledger.Store with the GuardianStore methods added in memory.
type Store struct {
	ledger.Store
	mu        sync.Mutex
	responses map[string][]byte
	seen      map[string]bool
	bundles   []ledger.PolicyBundle
}

// New wraps s.
func New(s ledger.Store) *Store {
	return &Store{Store: s, responses: map[string][]byte{}, seen: map[string]bool{}}
}

func (s *Store) AppendSigned(ctx context.Context, r ledger.Record, sign func(ledger.Appended) ([]byte, error)) (ledger.Appended, []byte, error) {
	a, err := s.Store.Append(ctx, r)
	if err != nil {
		return ledger.Appended{}, nil, err
	}
	key := fmt.Sprintf("%s/%d", a.SessionID, a.Position)
	s.mu.Lock()
	defer s.mu.Unlock()
	if a.Replayed {
		return a, s.responses[key], nil
	}
	b, err := sign(a)
	if err != nil {
		return ledger.Appended{}, nil, err
	}
	s.responses[key] = b
	return a, b, nil
}

func (s *Store) Response(ctx context.Context, sessionID string, position int64) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.responses[fmt.Sprintf("%s/%d", sessionID, position)]
	if !ok {
		return nil, ledger.ErrNotFound
	}
	return b, nil
}

func (s *Store) RecordRequest(ctx context.Context, sessionID, requestID, nonce string, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	rk, nk := sessionID+"/r/"+requestID, sessionID+"/n/"+nonce
	if s.seen[rk] || (nonce != "" && s.seen[nk]) {
		return ledger.ErrReplay
	}
	s.seen[rk] = true
	if nonce != "" {
		s.seen[nk] = true
	}
	return nil
}

func (s *Store) PutPolicyBundle(ctx context.Context, b ledger.PolicyBundle) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, have := range s.bundles {
		if have.ID == b.ID && have.Version == b.Version {
			if have.Digest != b.Digest {
				return ledger.ErrConflict
			}
			return nil
		}
	}
	s.bundles = append(s.bundles, b)
	return nil
}

func (s *Store) PolicyBundle(ctx context.Context, id, version string) (ledger.PolicyBundle, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.bundles {
		if b.ID == id && b.Version == version {
			return b, nil
		}
	}
	return ledger.PolicyBundle{}, ledger.ErrNotFound
}

func (s *Store) PolicyBundles(ctx context.Context) ([]ledger.PolicyBundle, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ledger.PolicyBundle(nil), s.bundles...), nil
}

var _ ledger.GuardianStore = (*Store)(nil)
