package main

import "testing"

func TestRedact(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"postgres://acs:s3cret@db:5432/ledger?sslmode=disable", "postgres://acs:xxxxx@db:5432/ledger?sslmode=disable"},
		{"postgres://acs@db/ledger", "postgres://acs@db/ledger"},
		{"postgres://db/ledger", "postgres://db/ledger"},
		{"./acsledger data", "./acsledger data"},
		{"sqlite:/var/lib/acs", "sqlite:/var/lib/acs"},
	} {
		if got := redact(tc.in); got != tc.want {
			t.Errorf("redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
