package pgstore_test

import (
	"testing"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/pgstore"
	"github.com/acsledger/acsledger/ledger/storetest"
)

func TestIngestConformance(t *testing.T) {
	storetest.RunIngest(t, func(t *testing.T) ledger.IngestStore {
		return openStore(t, newDB(t), pgstore.Options{})
	})
}
