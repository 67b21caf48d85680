package guardian_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/acsledger/acsledger/ledger"
)

// interimStore is TEMPORARY: it gives a real ledger.Store the rest of
// ledger.GuardianStore until ledger/sqlitestore and ledger/pgstore
// implement it (openStore uses theirs as soon as they do). Entries go to the
// real store; responses and replay history are kept in memory, and
// AppendSigned is not one transaction. Delete this file when both stores
// implement GuardianStore.
type interimStore struct {
	ledger.Store
	mu        sync.Mutex
	responses map[string][]byte
	seen      map[string]bool
}

func newInterimStore(s ledger.Store) *interimStore {
	return &interimStore{Store: s, responses: map[string][]byte{}, seen: map[string]bool{}}
}

func (s *interimStore) AppendSigned(ctx context.Context, r ledger.Record, sign func(ledger.Appended) ([]byte, error)) (ledger.Appended, []byte, error) {
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

func (s *interimStore) Response(ctx context.Context, sessionID string, position int64) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.responses[fmt.Sprintf("%s/%d", sessionID, position)]
	if !ok {
		return nil, ledger.ErrNotFound
	}
	return b, nil
}

func (s *interimStore) RecordRequest(ctx context.Context, sessionID, requestID, nonce string, at time.Time) error {
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

func (s *interimStore) PutPolicyBundle(ctx context.Context, b ledger.PolicyBundle) error {
	return fmt.Errorf("interim store: no policy bundles")
}

func (s *interimStore) PolicyBundle(ctx context.Context, id, version string) (ledger.PolicyBundle, error) {
	return ledger.PolicyBundle{}, ledger.ErrNotFound
}

func (s *interimStore) PolicyBundles(ctx context.Context) ([]ledger.PolicyBundle, error) {
	return nil, nil
}

var _ ledger.GuardianStore = (*interimStore)(nil)
