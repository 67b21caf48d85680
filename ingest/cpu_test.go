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
// and its PostgreSQL server: the cost of work on a shared machine, which
// the wall clock hides when other jobs take the cores. Linux only (/proc);
// PostgreSQL processes that exited meanwhile are not counted, so the pools
// must outlive the measurement.
func cpuTime() time.Duration { return selfCPU() + pgCPU() }

// pgCPU is the CPU time used so far by the PostgreSQL server this process
// started (internal/pgtest: the postmaster is a child of this process, its
// backends are its children), so that other jobs' servers on a shared
// machine are not counted. Against a server it did not start
// (ACSLEDGER_TEST_DATABASE_URL), every postgres process is counted.
func pgCPU() time.Duration {
	type proc struct {
		ppid int
		cpu  time.Duration
	}
	procs := make(map[int]proc)
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
		pid, _ := strconv.Atoi(s[:open-1])
		ppid, _ := strconv.Atoi(f[1])
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		procs[pid] = proc{ppid: ppid, cpu: time.Duration(ut+st) * (time.Second / 100)} // USER_HZ
	}
	self := os.Getpid()
	var own, all time.Duration
	found := false
	for _, p := range procs {
		all += p.cpu
		if p.ppid == self || procs[p.ppid].ppid == self && p.ppid != 0 {
			own += p.cpu
			found = true
		}
	}
	if !found {
		return all
	}
	return own
}

// selfCPU is the CPU time this process used so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
