package ingest_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuTime is the CPU time (user and system) used so far by this process
// and every running PostgreSQL process: the cost of work on a shared
// machine, which the wall clock hides when other jobs take the cores.
// Linux only (/proc); PostgreSQL processes that exited meanwhile are not
// counted, so the pools must outlive the measurement.
func cpuTime() time.Duration {
	d := selfCPU()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(b)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || close < open || !strings.HasPrefix(s[open+1:close], "postgres") {
			continue
		}
		f := strings.Fields(s[close+2:])
		if len(f) < 13 {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		d += time.Duration(ut+st) * (time.Second / 100) // USER_HZ
	}
	return d
}

// selfCPU is the CPU time this process used so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
