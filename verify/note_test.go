package verify

import "testing"

// TestParseCheckpoint: the log's own checkpoints carry no extension lines,
// those of other logs may; both readers refuse what is not a checkpoint.
func TestParseCheckpoint(t *testing.T) {
	t.Parallel()
	const root = "KgF4N9kVtzCIFb3eJXRq1aTvUFj2wz3Kkm7vZ9+1P0c="
	for _, tc := range []struct {
		name, text string
		ok, headOK bool
	}{
		{"three lines", "example.com/log\n42\n" + root + "\n", true, true},
		{"extension line", "example.com/log\n42\n" + root + "\next\n", false, true},
		{"no final newline", "example.com/log\n42\n" + root, false, false},
		{"leading zero", "example.com/log\n042\n" + root + "\n", false, false},
		{"plus sign", "example.com/log\n+42\n" + root + "\n", false, false},
		{"empty origin", "\n42\n" + root + "\n", false, false},
		{"short root", "example.com/log\n42\nAAAA\n", false, false},
		{"invalid UTF-8 origin", "example.com/\xfflog\n42\n" + root + "\n", false, false},
		{"invalid UTF-8 extension", "example.com/log\n42\n" + root + "\n\xff\n", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp, err := ParseCheckpoint([]byte(tc.text))
			if (err == nil) != tc.ok {
				t.Errorf("ParseCheckpoint: %+v, %v; want ok=%v", cp, err, tc.ok)
			}
			if err == nil && (cp.Origin != "example.com/log" || cp.Size != 42 || cp.Root[0] != 0x2a) {
				t.Errorf("ParseCheckpoint: %+v", cp)
			}
			head, err := ParseCheckpointHead([]byte(tc.text))
			if (err == nil) != tc.headOK {
				t.Errorf("ParseCheckpointHead: %+v, %v; want ok=%v", head, err, tc.headOK)
			}
			if err == nil && (head.Origin != "example.com/log" || head.Size != 42 || head.Root[0] != 0x2a) {
				t.Errorf("ParseCheckpointHead: %+v", head)
			}
		})
	}
}
