package ingest_test

import (
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/acsledger/acsledger/internal/proccpu"
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
	var pg []proccpu.Stat
	for _, p := range proccpu.All() {
		if strings.HasPrefix(p.Comm, "postgres") {
			pg = append(pg, p)
		}
	}
	if own := proccpu.Below(pg, os.Getpid()); len(own) > 0 {
		return proccpu.Sum(own)
	}
	return proccpu.Sum(pg)
}

// selfCPU is the CPU time this process used so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
