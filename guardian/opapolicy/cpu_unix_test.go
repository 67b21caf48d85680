//go:build unix

package opapolicy_test

import (
	"syscall"
	"time"
)

// processCPU is the CPU time this process has used, user and system: on a
// shared machine it moves with the work done rather than with the load,
// as wall-clock time does.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
