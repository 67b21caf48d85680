// Package hangwatch ends a test binary that hangs shortly before go test's
// own timeout would, so that the end of its output names the tests still
// running and where they wait.
//
// go test's timeout panic names the running tests at the top of a dump of
// every goroutine; a CI log that keeps only its tail loses them. Start
// prints the same dump, then one line per running test with the innermost
// frames of the code under test, and exits with status 2.
package hangwatch

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"
)

// Start arms the watch for the running test binary from its -test.timeout
// flag (parsing the command line if TestMain has not): it fires a tenth of
// the timeout, at most a minute, before go test's own. onFire, if not nil,
// runs once the stacks are taken, before they are printed (to stop a
// server the tests started). It returns a function that disarms the
// watch; with no timeout, the watch is never armed.
func Start(onFire func()) (stop func()) {
	if !flag.Parsed() {
		flag.Parse()
	}
	f := flag.Lookup("test.timeout")
	if f == nil {
		return func() {}
	}
	timeout, err := time.ParseDuration(f.Value.String())
	if err != nil || timeout <= 0 {
		return func() {}
	}
	margin := min(timeout/10, time.Minute)
	t := time.AfterFunc(timeout-margin, func() {
		dump := stacks()
		if onFire != nil {
			onFire()
		}
		Report(os.Stderr, timeout-margin, dump)
		os.Exit(2)
	})
	return func() { t.Stop() }
}

func stacks() []byte {
	for n := 1 << 20; ; n *= 2 {
		buf := make([]byte, n)
		if m := runtime.Stack(buf, true); m < n {
			return buf[:m]
		}
	}
}

// Report writes dump, the stacks of every goroutine, then the tests whose
// goroutines it holds: one line each, naming the test function and the
// innermost frames of the module's own code, with file and line.
func Report(w io.Writer, after time.Duration, dump []byte) {
	w.Write(dump)
	tests := Running(dump)
	fmt.Fprintf(w, "\nhangwatch: %d test goroutine(s) still running after %v; the test binary stops here:\n", len(tests), after.Round(time.Second))
	for _, t := range tests {
		fmt.Fprintf(w, "  %s\n", t)
	}
}

// Running returns, for each goroutine of dump that runs a test (one with
// a testing.tRunner frame), the test's function and where the goroutine
// waits: the two innermost frames of the test's own module (functions
// whose path shares the test's first two path elements).
func Running(dump []byte) []string {
	var out []string
	for _, g := range bytes.Split(dump, []byte("\n\n")) {
		frames := parse(g)
		runner := -1
		for i, fr := range frames {
			if fr.fn == "testing.tRunner" {
				runner = i
				break
			}
		}
		if runner < 1 {
			continue
		}
		test := frames[runner-1].fn
		if strings.HasPrefix(test, "testing.") {
			continue // the main goroutine, running the tests in turn
		}
		module := modulePrefix(test)
		var where []string
		for _, fr := range frames[:runner] {
			if strings.HasPrefix(fr.fn, module) && len(where) < 2 {
				where = append(where, fmt.Sprintf("%s (%s)", short(fr.fn), fr.at))
			}
		}
		state := ""
		if first := bytes.IndexByte(g, '\n'); first > 0 {
			state = string(g[:first])
		}
		out = append(out, fmt.Sprintf("%s [%s] at %s", short(test), strings.TrimSuffix(strings.TrimPrefix(state, "goroutine "), ":"), strings.Join(where, " <- ")))
	}
	return out
}

type frame struct{ fn, at string }

// parse reads one goroutine's block: a header line, then pairs of a
// function line and a tab-indented file:line line.
func parse(g []byte) []frame {
	var frames []frame
	sc := bufio.NewScanner(bytes.NewReader(g))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	var fn string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "goroutine "), strings.HasPrefix(line, "created by "):
			fn = ""
		case strings.HasPrefix(line, "\t"):
			if fn != "" {
				at := strings.TrimSpace(line)
				if i := strings.LastIndex(at, " +0x"); i > 0 {
					at = at[:i]
				}
				frames = append(frames, frame{fn, at})
				fn = ""
			}
		default:
			fn = line
			if i := strings.LastIndex(fn, "("); i > 0 {
				fn = fn[:i]
			}
		}
	}
	return frames
}

// modulePrefix returns a function's path up to its second slash
// (github.com/owner/), or its package name with the dot for a path
// without one.
func modulePrefix(fn string) string {
	if i := strings.Index(fn, "/"); i >= 0 {
		if j := strings.Index(fn[i+1:], "/"); j >= 0 {
			return fn[:i+1+j+1]
		}
	}
	pkg, _, _ := strings.Cut(short(fn), ".")
	return pkg + "."
}

// short drops a function's package path up to its last slash.
func short(fn string) string {
	if i := strings.LastIndex(fn, "/"); i >= 0 {
		return fn[i+1:]
	}
	return fn
}
