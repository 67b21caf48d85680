package hangwatch_test

import (
	"bytes"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/internal/hangwatch"
)

const childEnv = "HANGWATCH_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		defer hangwatch.Start(func() { os.Stderr.WriteString("onFire ran\n") })()
	}
	os.Exit(m.Run())
}

// waitForever asks a loopback server that accepts the connection and
// never answers, as a test does whose handler hangs.
func waitForever(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	http.Get("http://" + l.Addr().String() + "/")
}

// TestHang runs this test binary again, with a 4 s timeout, as a child
// whose TestHang hangs in a subtest: the watch stops it first, with
// status 2 rather than go test's panic, and the last lines of its output
// name the hanging subtest and the line where it waits.
func TestHang(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Run("child", waitForever)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHang$", "-test.timeout=4s")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("child ended with %v, want exit status 2:\n%s", err, out.String())
	}
	text := out.String()
	if strings.Contains(text, "panic: test timed out") {
		t.Fatalf("go test's timeout fired before the watch:\n%s", text)
	}
	if !strings.Contains(text, "onFire ran\n") || !strings.Contains(text, "goroutine ") {
		t.Errorf("want onFire's output and the goroutine dump:\n%s", text)
	}
	lines := strings.Split(strings.TrimSpace(text), "\n")
	tail := strings.Join(lines[max(0, len(lines)-4):], "\n")
	if !strings.Contains(tail, "still running after 4s") && !strings.Contains(tail, "still running after 3s") {
		t.Errorf("the tail does not say how long:\n%s", tail)
	}
	if !strings.Contains(tail, "hangwatch_test.waitForever") || !strings.Contains(tail, "hangwatch_test.go:") {
		t.Errorf("the tail does not name the hanging test and where it waits:\n%s", tail)
	}
}

// TestRunning reads a committed dump: the main goroutine (in a tRunner of
// its own, but running no test), a test waiting in its own body, a parent
// waiting for its subtest, a subtest waiting in a helper below
// another module's frame, and a goroutine that is not a test's.
func TestRunning(t *testing.T) {
	dump, err := os.ReadFile("testdata/dump.txt")
	if err != nil {
		t.Fatal(err)
	}
	got := hangwatch.Running(dump)
	want := []string{
		"web.TestIngestBackpressure [7 [chan receive, 29 minutes]] at web.TestIngestBackpressure (/src/web/ingest_test.go:98)",
		"web.TestAppendRacedOutOfScope [20 [chan receive, 29 minutes]] at web.TestAppendRacedOutOfScope (/src/web/scoperace_test.go:79)",
		"web.TestAppendRacedOutOfScope.func1 [21 [IO wait, 29 minutes]] at web.do (/src/web/evidence_test.go:56) <- web.testAppendRacedOutOfScope.func1 (/src/web/scoperace_test.go:97)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Running:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
