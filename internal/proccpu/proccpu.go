// Package proccpu reads how much CPU time (user plus system) processes
// have used so far, from Linux's /proc/<pid>/stat ([proc_pid_stat(5)]).
//
// The benchmarks report CPU per operation beside their rates: on a shared
// machine the rate swings with other jobs' load, the CPU an operation
// costs (ours and the database server's) much less. Where /proc cannot be
// read (another system, a process that has exited) a reading is 0 or
// missing, never an error: a benchmark then reports no CPU figure rather
// than failing.
//
// [proc_pid_stat(5)]: https://man7.org/linux/man-pages/man5/proc_pid_stat.5.html
package proccpu

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// tick is one clock tick of /proc's utime and stime: 1/USER_HZ, which the
// kernel fixes at 100 on every architecture this runs on (x86, arm64).
const tick = time.Second / 100

// Stat is what one /proc/<pid>/stat line says of a process's CPU time.
type Stat struct {
	PID  int
	PPID int
	// Comm is the command name, as the kernel keeps it (at most 15
	// bytes; it may hold spaces and parentheses).
	Comm string
	// CPU is the user plus system time the process used so far (its own
	// threads; not its children's).
	CPU time.Duration
}

// ParseStat parses a /proc/<pid>/stat line.
func ParseStat(line []byte) (Stat, error) {
	// proc_pid_stat(5): "pid (comm) state ppid ... utime stime ...". The
	// command name may hold spaces and ")", so it ends at the last ")";
	// the fields after it count from state (field 3).
	open, close := bytes.IndexByte(line, '('), bytes.LastIndexByte(line, ')')
	if open < 1 || close < open {
		return Stat{}, fmt.Errorf("couldn't find the command name in %q", line)
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(line[:open])))
	if err != nil {
		return Stat{}, fmt.Errorf("couldn't parse the pid of %q: %w", line, err)
	}
	f := bytes.Fields(line[close+1:])
	// state(3) ppid(4) ... utime(14) stime(15)
	if len(f) < 13 {
		return Stat{}, fmt.Errorf("%q has %d fields after the command name, want 13 or more", line, len(f))
	}
	s := Stat{PID: pid, Comm: string(line[open+1 : close])}
	var ut, st int64
	if s.PPID, err = strconv.Atoi(string(f[1])); err == nil {
		if ut, err = strconv.ParseInt(string(f[11]), 10, 64); err == nil {
			st, err = strconv.ParseInt(string(f[12]), 10, 64)
		}
	}
	if err != nil {
		return Stat{}, fmt.Errorf("couldn't parse the stat line %q: %w", line, err)
	}
	s.CPU = time.Duration(ut+st) * tick
	return s, nil
}

// Read reads process pid's stat line.
func Read(pid int) (Stat, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Stat{}, fmt.Errorf("couldn't read the CPU time of process %d: %w", pid, err)
	}
	return ParseStat(raw)
}

// Of returns the CPU time process pid used so far, or 0 where it cannot
// be read.
func Of(pid int) time.Duration {
	s, err := Read(pid)
	if err != nil {
		return 0
	}
	return s.CPU
}

// All returns the stat of every process that can be read now (none
// outside Linux).
func All() []Stat {
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	out := make([]Stat, 0, len(paths))
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue // it exited since the glob
		}
		if s, err := ParseStat(raw); err == nil {
			out = append(out, s)
		}
	}
	return out
}

// Below returns the processes of procs that descend from root (its
// children, theirs, and so on) through processes of procs: a server's
// processes, once procs is filtered to its command name.
func Below(procs []Stat, root int) []Stat {
	parent := make(map[int]int, len(procs))
	for _, p := range procs {
		parent[p.PID] = p.PPID
	}
	var out []Stat
	for _, p := range procs {
		// Walk up through procs; len(procs) steps end any cycle.
		for up, n := p.PPID, 0; n < len(procs); n++ {
			if up == root {
				out = append(out, p)
				break
			}
			next, ok := parent[up]
			if !ok {
				break
			}
			up = next
		}
	}
	return out
}

// Sum adds up the CPU time of procs.
func Sum(procs []Stat) time.Duration {
	var d time.Duration
	for _, p := range procs {
		d += p.CPU
	}
	return d
}
