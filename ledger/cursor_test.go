package ledger

import "testing"

func TestCursor(t *testing.T) {
	for _, seq := range []int64{0, 1, 42, 1 << 40} {
		got, err := ParseCursor(FormatCursor(seq))
		if err != nil || got != seq {
			t.Errorf("round trip of %d: %d, %v", seq, got, err)
		}
	}
	if got, err := ParseCursor(""); err != nil || got != 0 {
		t.Errorf(`ParseCursor(""): %d, %v`, got, err)
	}
	for _, bad := range []string{"-1", "007", "+7", "1e3", "x", "99999999999999999999"} {
		if _, err := ParseCursor(bad); err == nil {
			t.Errorf("ParseCursor(%q) accepted", bad)
		}
	}
}
