package sqlitestore_test

import (
	"testing"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/storetest"
)

func TestIngestConformance(t *testing.T) {
	storetest.RunIngest(t, func(t *testing.T) ledger.IngestStore {
		_, s := openFile(t, ledger.Options{})
		return s
	})
}
