// Package launch starts a server process for a test and waits until it
// says where it serves: `acsledger serve` logs the line carrying
// url=http://127.0.0.1:<port> once its listener is open, so a test that
// asks for port 0 learns the real port from the log, not by polling.
//
// The command's tests (cmd/acsledger) and the fault drills
// (internal/drills, build tag drills) both start the built binary this
// way; the package carries no build tag so that both can use it. The
// two commands' testscript runs share its `exitcode` command, ExitCode.
package launch

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// servingLine is how `acsledger serve` logs the address it listens at.
var servingLine = regexp.MustCompile(`url=(https?://[0-9.:]+)`)

// Process is a started server process and what it wrote to stderr.
type Process struct {
	// URL is the address the process said it serves at.
	URL string

	name string
	cmd  *exec.Cmd
	mu   sync.Mutex
	logs bytes.Buffer
	done chan error // receives the process's exit once
	exit error
	gone bool
}

// Start starts cmd, which must not have its Stderr set, and returns once
// the process logged the URL it serves at. It fails t if the process
// exits before that or does not log it within a minute. The process is
// killed when t ends if it still runs.
func Start(t testing.TB, cmd *exec.Cmd) *Process {
	t.Helper()
	p := &Process{name: filepath.Base(cmd.Path), cmd: cmd, done: make(chan error, 1)}
	if len(cmd.Args) > 1 {
		p.name += " " + cmd.Args[1]
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("couldn't start %s: %v", p.name, err)
	}
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.logs.WriteString(line + "\n")
			p.mu.Unlock()
			if m := servingLine.FindStringSubmatch(line); m != nil {
				select {
				case urlc <- m[1]:
				default:
				}
			}
		}
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if !p.Wait(0) {
			cmd.Process.Kill()
			p.Wait(30 * time.Second)
		}
	})
	select {
	case p.URL = <-urlc:
	case err := <-p.done:
		p.done <- err
		t.Fatalf("%s exited before serving: %v\n%s", p.name, err, p.Log())
	case <-time.After(time.Minute):
		t.Fatalf("%s did not report its address within a minute\n%s", p.name, p.Log())
	}
	return p
}

// Log returns what the process wrote to stderr so far.
func (p *Process) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// Wait waits up to d for the process to exit and reports whether it did;
// with d <= 0 it only looks.
func (p *Process) Wait(d time.Duration) bool {
	p.mu.Lock()
	gone := p.gone
	p.mu.Unlock()
	if gone {
		return true
	}
	if d <= 0 {
		select {
		case err := <-p.done:
			p.exited(err)
			return true
		default:
			return false
		}
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case err := <-p.done:
		p.exited(err)
		return true
	case <-timer.C:
		return false
	}
}

// exited records the process's exit, which done delivers once.
func (p *Process) exited(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gone, p.exit = true, err
}

// Kill sends SIGKILL: no shutdown, no flush, whatever was in flight is
// cut where it stood. It fails t unless the process is gone within 30s.
func (p *Process) Kill(t testing.TB) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("couldn't kill %s: %v", p.name, err)
	}
	if !p.Wait(30 * time.Second) {
		t.Fatalf("%s still runs 30s after SIGKILL", p.name)
	}
}

// Stop sends sig (SIGTERM, SIGINT: what an orchestrator or a terminal
// sends) and fails t unless the process exits cleanly within 30s.
func (p *Process) Stop(t testing.TB, sig os.Signal) {
	t.Helper()
	p.cmd.Process.Signal(sig)
	if !p.Wait(30 * time.Second) {
		t.Fatalf("%s did not stop within 30s of %v\n%s", p.name, sig, p.Log())
	}
	p.mu.Lock()
	exit := p.exit
	p.mu.Unlock()
	if exit != nil {
		t.Fatalf("%s exited with %v after %v\n%s", p.name, exit, sig, p.Log())
	}
}

// ExitCode is the scripts' `exitcode N command [args...]` of a testscript
// run: it runs name with args and fails the script unless the command
// exits with status want.
func ExitCode(ts *testscript.TestScript, want, name string, args ...string) {
	n, err := strconv.Atoi(want)
	if err != nil {
		ts.Fatalf("exitcode: %v", err)
	}
	got := 0
	if err := ts.Exec(name, args...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("exitcode: %v", err)
		}
		got = ee.ExitCode()
	}
	if got != n {
		ts.Fatalf("%s exited with status %d, want %d", name, got, n)
	}
}
