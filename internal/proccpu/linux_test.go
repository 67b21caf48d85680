//go:build linux

package proccpu

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// burnEnv makes the test binary a child that burns the CPU time it names
// (a duration), says "burnt" on stdout and waits for stdin to close.
const burnEnv = "PROCCPU_TEST_BURN"

func TestMain(m *testing.M) {
	if d := os.Getenv(burnEnv); d != "" {
		want, err := time.ParseDuration(d)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		for selfCPU() < want {
			spin()
		}
		fmt.Println("burnt")
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// selfCPU is this process's CPU time from getrusage, which does not read
// /proc: the reference the readings are checked against.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

var sink uint64

// spin burns a little CPU.
func spin() {
	x := sink
	for i := range 1_000_000 {
		x = x*6364136223846793005 + uint64(i)
	}
	sink = x
}

// TestChild reads a child that burnt 300ms of CPU: the reading is what
// the child's own clock says (less under a tick: /proc counts whole
// ticks), the child is in All with this process as its parent, and Below
// finds it under this process.
func TestChild(t *testing.T) {
	const burn = 300 * time.Millisecond
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), burnEnv+"="+burn.String())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	start := time.Now()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "burnt\n" {
		t.Fatalf("the child said %q, %v", line, err)
	}
	wall := time.Since(start)
	pid := cmd.Process.Pid
	got := Of(pid)
	all := All()
	below := Below(all, os.Getpid())
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	final := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()

	if got < burn-tick || got > final || got > wall*time.Duration(runtime.NumCPU()) {
		t.Errorf("the child burnt %v of CPU in %v; read %v while it waited, %v when it exited", burn, wall.Round(time.Millisecond), got, final)
	}
	// Between the reading and the exit the child only read its stdin.
	if final-got > 50*time.Millisecond {
		t.Errorf("read %v while the child waited; it exited with %v", got, final)
	}
	var inAll, inBelow bool
	for _, s := range all {
		if s.PID == pid {
			// The child's runtime may still spend a tick while it
			// waits (its sysmon, a GC).
			inAll = s.PPID == os.Getpid() && s.CPU >= got && s.CPU-got <= tick
		}
	}
	for _, s := range below {
		inBelow = inBelow || s.PID == pid
	}
	if !inAll || !inBelow {
		t.Errorf("the child %d in All with this process as parent and its CPU: %v; in Below: %v", pid, inAll, inBelow)
	}
}

// TestSelf burns CPU in this process and checks the reading grows as
// getrusage does.
func TestSelf(t *testing.T) {
	r0, p0 := selfCPU(), Of(os.Getpid())
	for selfCPU()-r0 < 300*time.Millisecond {
		spin()
	}
	p1, r1 := Of(os.Getpid()), selfCPU()
	if d, want := p1-p0, r1-r0; d < want-50*time.Millisecond || d > want+50*time.Millisecond {
		t.Errorf("/proc says this process used %v, getrusage %v", d, want)
	}
}
