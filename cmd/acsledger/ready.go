package main

import (
	"context"

	"github.com/acsledger/acsledger/ledger/tlog"
	"github.com/acsledger/acsledger/web"
)

// pinger is the store's readiness probe (storeopen.Store.Ping).
type pinger interface {
	Ping(ctx context.Context) error
}

// readiness is serve's /readyz check: the store can take an append, and
// the Merkle log's latest integration succeeded (entries appended while it
// fails are recorded but not anchored).
func readiness(store pinger, log *tlog.Log) web.Ready {
	return func(ctx context.Context) error {
		if err := store.Ping(ctx); err != nil {
			return &web.NotReadyError{Component: "store", Err: err}
		}
		if err := log.Err(); err != nil {
			return &web.NotReadyError{Component: "log", Err: err}
		}
		return nil
	}
}
