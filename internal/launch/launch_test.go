package launch

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperEnv makes the test binary act as a server: it logs a few lines
// and the url line, then waits for SIGTERM and exits cleanly.
const helperEnv = "LAUNCH_TEST_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM)
		fmt.Fprintln(os.Stderr, "level=INFO msg=starting")
		fmt.Fprintln(os.Stderr, "level=INFO msg=serving url=http://127.0.0.1:43017")
		<-sigs
		fmt.Fprintln(os.Stderr, "level=INFO msg=stopped")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func helper(t *testing.T) *Process {
	t.Helper()
	cmd := exec.Command(os.Args[0], "serve")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	return Start(t, cmd)
}

func TestStartStop(t *testing.T) {
	p := helper(t)
	if p.URL != "http://127.0.0.1:43017" {
		t.Errorf("URL %q, want the one the process logged", p.URL)
	}
	if p.Wait(0) {
		t.Fatal("the process counts as exited while it waits for a signal")
	}
	p.Stop(t, syscall.SIGTERM)
	if !p.Wait(0) {
		t.Error("the process still counts as running after Stop")
	}
	if log := p.Log(); !strings.Contains(log, "msg=starting\n") || !strings.HasSuffix(log, "msg=stopped\n") {
		t.Errorf("log misses lines before or after the url line:\n%s", log)
	}
}

func TestKill(t *testing.T) {
	p := helper(t)
	start := time.Now()
	p.Kill(t)
	if !p.Wait(0) || time.Since(start) > 10*time.Second {
		t.Errorf("the process is not gone %v after SIGKILL", time.Since(start))
	}
	if strings.Contains(p.Log(), "msg=stopped") {
		t.Errorf("the process shut down cleanly on SIGKILL:\n%s", p.Log())
	}
}
