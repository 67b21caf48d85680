package ingestapi_test

import (
	"testing"

	"github.com/acsledger/acsledger/internal/pgtest"
)

// TestMain stops the throwaway PostgreSQL server the tests started.
func TestMain(m *testing.M) { pgtest.Main(m) }
