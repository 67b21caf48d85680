package pgstore_test

import (
	"testing"

	"github.com/acsledger/acsledger/ledger/pgstore"
)

func TestParseLSN(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want pgstore.LSN
	}{
		{"0/0", 0},
		{"0/3000060", 0x3000060},
		{"16/B374D848", 0x16_B374D848},
		{"FFFFFFFF/FFFFFFFF", 1<<64 - 1},
	} {
		got, err := pgstore.ParseLSN(tc.in)
		if err != nil || got != tc.want || got.String() != tc.in {
			t.Errorf("ParseLSN(%q) = %v (%s), %v; want %v", tc.in, uint64(got), got, err, uint64(tc.want))
		}
	}
	for _, bad := range []string{"", "0", "0/", "/0", "1/2/3", "G/0", "100000000/0", "-1/0"} {
		if _, err := pgstore.ParseLSN(bad); err == nil {
			t.Errorf("ParseLSN(%q) accepted", bad)
		}
	}
}
