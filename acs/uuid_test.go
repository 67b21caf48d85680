package acs_test

import (
	"regexp"
	"testing"

	"github.com/acsledger/acsledger/acs"
)

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestNewUUID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := acs.NewUUID()
		if !uuidV4.MatchString(id) {
			t.Fatalf("NewUUID() = %q, not a lowercase version 4 UUID", id)
		}
		if seen[id] {
			t.Fatalf("NewUUID() repeated %q", id)
		}
		seen[id] = true
	}
}
