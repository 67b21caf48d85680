package proccpu

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		file string
		want Stat
	}{
		// A postmaster whose utime is 1234 ticks and stime 567; the 610
		// and 585 after them are its children's, not its own.
		{"postmaster.stat", Stat{PID: 12557, PPID: 10888, Comm: "postgres", CPU: 18010 * time.Millisecond}},
		// A command name with spaces and parentheses ends at the last ")".
		{"parens.stat", Stat{PID: 4242, PPID: 4241, Comm: "x) y (z)", CPU: 100 * time.Millisecond}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseStat(raw)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseStatRejects(t *testing.T) {
	for name, line := range map[string]string{
		"empty":              "",
		"no command name":    "12 S 1 12 12 0 -1 0 0 0 0 0 5 5 0 0",
		"no pid":             "(cat) S 1 12 12 0 -1 0 0 0 0 0 5 5 0 0",
		"pid not a number":   "x1 (cat) S 1 12 12 0 -1 0 0 0 0 0 5 5 0 0",
		"cut before stime":   "12 (cat) S 1 12 12 0 -1 0 0 0 0 0 5",
		"utime not a number": "12 (cat) S 1 12 12 0 -1 0 0 0 0 0 u 5 0 0",
		"ppid not a number":  "12 (cat) S p 12 12 0 -1 0 0 0 0 0 5 5 0 0",
	} {
		t.Run(name, func(t *testing.T) {
			if s, err := ParseStat([]byte(line)); err == nil {
				t.Errorf("ParseStat(%q) = %+v, want an error", line, s)
			}
		})
	}
}

func TestBelow(t *testing.T) {
	procs := []Stat{
		{PID: 200, PPID: 100, CPU: 1 * time.Second},   // root's child
		{PID: 300, PPID: 200, CPU: 2 * time.Second},   // its child
		{PID: 310, PPID: 300, CPU: 4 * time.Second},   // and grandchild
		{PID: 400, PPID: 1, CPU: 8 * time.Second},     // another tree
		{PID: 500, PPID: 400, CPU: 16 * time.Second},  // below it
		{PID: 600, PPID: 700, CPU: 32 * time.Second},  // a cycle, which
		{PID: 700, PPID: 600, CPU: 64 * time.Second},  // must end the walk
		{PID: 800, PPID: 900, CPU: 128 * time.Second}, // 900 is not in procs
	}
	below := Below(procs, 100)
	var pids []int
	for _, p := range below {
		pids = append(pids, p.PID)
	}
	if len(pids) != 3 || pids[0] != 200 || pids[1] != 300 || pids[2] != 310 {
		t.Errorf("Below(procs, 100) = %v, want [200 300 310]", pids)
	}
	if got := Sum(below); got != 7*time.Second {
		t.Errorf("Sum = %v, want 7s", got)
	}
	if got := Below(procs, 900); len(got) != 1 || got[0].PID != 800 {
		t.Errorf("Below(procs, 900) = %+v, want process 800 only", got)
	}
	if got := Of(-1); got != 0 {
		t.Errorf("Of(-1) = %v, want 0 for a process that cannot be read", got)
	}
	if s, err := Read(-1); err == nil || !strings.Contains(err.Error(), "process -1") {
		t.Errorf("Read(-1) = %+v, %v; want an error naming the process", s, err)
	}
}
